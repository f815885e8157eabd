//! `/v1/schedules`: recurring sends into a queue or a topic.

use reqwest::{Method, StatusCode};
use sluice_api::{CreateScheduleRequest, Schedule, ScheduleList};

use crate::{Client, Result, error_from};

/// What [`Client::create_schedule`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedSchedule {
    /// The schedule as it is now.
    pub schedule: Schedule,
    /// False when a schedule with this definition already existed.
    pub created: bool,
}

impl Client {
    /// `POST /v1/schedules`. Creating it again with the same definition succeeds with
    /// `created: false`; with another it fails with `schedule_exists`.
    pub async fn create_schedule(&self, request: &CreateScheduleRequest) -> Result<CreatedSchedule> {
        let (status, schedule) = self.json_with_status(Method::POST, &["v1", "schedules"], &[], Some(request)).await?;
        Ok(CreatedSchedule { schedule, created: status == StatusCode::CREATED })
    }

    /// `GET /v1/schedules`: one page of schedules whose names start with `prefix`.
    pub async fn list_schedules(
        &self,
        prefix: Option<&str>,
        limit: Option<u32>,
        next_token: Option<&str>,
    ) -> Result<ScheduleList> {
        let limit = limit.map(|l| l.to_string());
        let query: Vec<(&str, &str)> = [("prefix", prefix), ("limit", limit.as_deref()), ("next_token", next_token)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        self.json(Method::GET, &["v1", "schedules"], &query, None::<&()>).await
    }

    /// Every schedule whose name starts with `prefix`, following `next_token` across pages.
    pub async fn list_all_schedules(&self, prefix: Option<&str>) -> Result<Vec<Schedule>> {
        let mut all = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_schedules(prefix, None, token.as_deref()).await?;
            all.extend(page.schedules);
            match page.next_token {
                Some(next) if Some(&next) != token.as_ref() => token = Some(next),
                _ => return Ok(all),
            }
        }
    }

    /// `GET /v1/schedules/{name}`: the schedule, its state and its next ticks.
    pub async fn get_schedule(&self, name: &str) -> Result<Schedule> {
        self.json(Method::GET, &["v1", "schedules", name], &[], None::<&()>).await
    }

    /// `POST /v1/schedules/{name}/pause`.
    pub async fn pause_schedule(&self, name: &str) -> Result<Schedule> {
        self.json(Method::POST, &["v1", "schedules", name, "pause"], &[], None::<&()>).await
    }

    /// `POST /v1/schedules/{name}/resume`: from the next tick to come.
    pub async fn resume_schedule(&self, name: &str) -> Result<Schedule> {
        self.json(Method::POST, &["v1", "schedules", name, "resume"], &[], None::<&()>).await
    }

    /// `DELETE /v1/schedules/{name}`.
    pub async fn delete_schedule(&self, name: &str) -> Result<()> {
        let call = self.call(Method::DELETE, &["v1", "schedules", name], &[], None::<&()>, self.timeout)?;
        let (status, body) = self.execute(call).await?;
        if status.is_success() { Ok(()) } else { Err(error_from(status, &body)) }
    }
}
