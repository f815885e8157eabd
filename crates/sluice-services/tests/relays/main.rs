//! The outbox relay against real databases: SQLite files always, PostgreSQL when
//! `SLUICE_TEST_PG_URL` is set and MySQL/MariaDB when `SLUICE_TEST_MYSQL_URL` is (each fails
//! loudly when set and unreachable, and says it was skipped when unset). Every test has its
//! own schema, tables or file, so they run in parallel beside other tests on the same server.

mod mysql_db;
mod outbox;
mod postgres_db;
mod scenarios;
mod sqlite_db;
mod support;

use sluice_services::relays::AfterPublish;

use outbox::Outbox;

macro_rules! skip_unless {
    ($url:expr, $var:literal) => {
        match $url {
            Some(url) => url,
            None => {
                eprintln!(concat!($var, " is not set: skipped"));
                return;
            }
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rows_arrive_in_order_and_are_deleted() {
    scenarios::in_order(&sqlite_db::Sqlite::new(), AfterPublish::Delete).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_rows_arrive_in_order_and_are_marked() {
    scenarios::in_order(&sqlite_db::Sqlite::new(), AfterPublish::Mark).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_writers_take_turns_so_ids_follow_commits() {
    let db = sqlite_db::Sqlite::new();
    let open = db.begin().await;
    let refused = db.try_insert_now().expect_err("a second writer must wait for the first");
    assert!(refused.to_string().contains("locked"), "{refused}");
    db.commit(open).await;
    db.try_insert_now().expect("writes once the first committed");
    scenarios::concurrent(&sqlite_db::Sqlite::new(), 7).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_rows_arrive_in_order_deleted_and_marked() {
    let url = skip_unless!(postgres_db::url(), "SLUICE_TEST_PG_URL");
    for after in [AfterPublish::Delete, AfterPublish::Mark] {
        let db = postgres_db::Postgres::new(&url).await;
        scenarios::in_order(&db, after).await;
        db.drop_table().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_late_commits_are_published_in_order() {
    let url = skip_unless!(postgres_db::url(), "SLUICE_TEST_PG_URL");
    let db = postgres_db::Postgres::new(&url).await;
    scenarios::late_commit(&db).await;
    scenarios::concurrent(&db, 11).await;
    db.drop_table().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_rows_arrive_in_order_deleted_and_marked() {
    let url = skip_unless!(mysql_db::url(), "SLUICE_TEST_MYSQL_URL");
    for after in [AfterPublish::Delete, AfterPublish::Mark] {
        let db = mysql_db::Mysql::new(&url).await;
        scenarios::in_order(&db, after).await;
        db.drop_table().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_late_commits_are_published_in_order() {
    let url = skip_unless!(mysql_db::url(), "SLUICE_TEST_MYSQL_URL");
    let db = mysql_db::Mysql::new(&url).await;
    scenarios::late_commit(&db).await;
    scenarios::concurrent(&db, 13).await;
    db.drop_table().await;
}
