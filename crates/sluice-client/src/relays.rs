//! Outbox relays (`/v1/relays...`): create, list, get, pause, resume and delete.

use reqwest::{Method, StatusCode};
use sluice_api::{CreateRelayRequest, Relay, RelayList};

use crate::{Client, Result, error_from};

/// The answer to [`Client::create_relay`].
#[derive(Debug, Clone, PartialEq)]
pub struct CreatedRelay {
    /// The relay as it is now (its source with the password masked).
    pub relay: Relay,
    /// False when a relay with this exact configuration already existed.
    pub created: bool,
}

impl Client {
    /// `POST /v1/relays`: creates a relay, which starts relaying within a second. Creating it
    /// again with the same configuration answers the existing relay.
    pub async fn create_relay(&self, request: &CreateRelayRequest) -> Result<CreatedRelay> {
        let (status, relay) = self.json_with_status(Method::POST, &["v1", "relays"], &[], Some(request)).await?;
        Ok(CreatedRelay { relay, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/relays`: one page of relays in name order, each with its status.
    pub async fn list_relays(&self, limit: Option<u32>, next_token: Option<&str>) -> Result<RelayList> {
        let limit = limit.map(|l| l.to_string());
        let query: Vec<(&str, &str)> = [("limit", limit.as_deref()), ("next_token", next_token)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        self.json(Method::GET, &["v1", "relays"], &query, None::<&()>).await
    }

    /// Every relay, following `next_token` across pages.
    pub async fn list_all_relays(&self) -> Result<Vec<Relay>> {
        let mut relays = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_relays(None, token.as_deref()).await?;
            relays.extend(page.relays);
            match page.next_token {
                Some(next) => token = Some(next),
                None => return Ok(relays),
            }
        }
    }

    /// `GET /v1/relays/{name}`: the relay with its lag, totals and last error.
    pub async fn get_relay(&self, name: &str) -> Result<Relay> {
        self.json(Method::GET, &["v1", "relays", name], &[], None::<&()>).await
    }

    /// `POST /v1/relays/{name}/pause`: stops relaying (on every node) after the current poll.
    pub async fn pause_relay(&self, name: &str) -> Result<Relay> {
        self.json(Method::POST, &["v1", "relays", name, "pause"], &[], None::<&()>).await
    }

    /// `POST /v1/relays/{name}/resume`.
    pub async fn resume_relay(&self, name: &str) -> Result<Relay> {
        self.json(Method::POST, &["v1", "relays", name, "resume"], &[], None::<&()>).await
    }

    /// `DELETE /v1/relays/{name}`: removes the relay; its table is left as it is.
    pub async fn delete_relay(&self, name: &str) -> Result<()> {
        let call = self.call(Method::DELETE, &["v1", "relays", name], &[], None::<&()>, self.timeout)?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(error_from(status, &body)) }
    }
}
