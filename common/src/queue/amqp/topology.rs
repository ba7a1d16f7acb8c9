//! The broker's side of the queue: connecting with publisher confirms and
//! declaring the exchanges and queues, idempotently, on every connection.

use std::time::Duration;

use lapin::{
    Channel, Connection, ConnectionProperties, ExchangeKind,
    options::{
        ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
    },
    types::{AMQPValue, FieldTable, LongString, ShortString},
};

use super::{AmqpConfig, NOTIFY};

/// Redeliveries after which a message that keeps killing workers is
/// dead-lettered by the broker (quorum queues count them).
const DELIVERY_LIMIT: i64 = 20;

fn args(entries: &[(&str, AMQPValue)]) -> FieldTable {
    let mut table = FieldTable::default();
    for (k, v) in entries {
        table.insert(ShortString::from(*k), v.clone());
    }
    table
}

fn text(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// Connects, opens a channel with publisher confirms, declares the topology
/// (with a delay queue for each of `delays` when they are given).
pub(super) async fn connect(
    config: &AmqpConfig,
    delays: Option<&[Duration]>,
) -> lapin::Result<(Connection, Channel)> {
    let props = ConnectionProperties::default().with_connection_name("tocsin".into());
    let conn = Connection::connect(&config.url, props).await?;
    let channel = conn.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    declare(&channel, config).await?;
    if let Some(delays) = delays {
        declare_retry_queues(&channel, config, delays).await?;
    }
    Ok((conn, channel))
}

/// The exchanges, the notify queue and the dead-letter queue.
async fn declare(channel: &Channel, config: &AmqpConfig) -> lapin::Result<()> {
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    let durable_queue = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for exchange in [config.exchange(), config.dead_letter_exchange()] {
        channel
            .exchange_declare(
                exchange.into(),
                ExchangeKind::Direct,
                durable,
                FieldTable::default(),
            )
            .await?;
    }
    let queue = config.queue();
    channel
        .queue_declare(
            queue.clone().into(),
            durable_queue,
            args(&[
                ("x-queue-type", text("quorum")),
                (
                    "x-dead-letter-exchange",
                    text(&config.dead_letter_exchange()),
                ),
                ("x-dead-letter-routing-key", text(NOTIFY)),
                ("x-delivery-limit", AMQPValue::LongLongInt(DELIVERY_LIMIT)),
            ]),
        )
        .await?;
    channel
        .queue_bind(
            queue.into(),
            config.exchange().into(),
            NOTIFY.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let dead = config.dead_letter_queue();
    channel
        .queue_declare(
            dead.clone().into(),
            durable_queue,
            args(&[("x-queue-type", text("quorum"))]),
        )
        .await?;
    channel
        .queue_bind(
            dead.into(),
            config.dead_letter_exchange().into(),
            NOTIFY.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok(())
}

/// One delay queue per delay a job may be published with.
async fn declare_retry_queues(
    channel: &Channel,
    config: &AmqpConfig,
    delays: &[Duration],
) -> lapin::Result<()> {
    let durable_queue = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    for &delay in delays {
        // Classic queues: per-message TTL expiry is their long-standing
        // feature, and nothing consumes them.
        channel
            .queue_declare(
                config.retry_queue(delay).into(),
                durable_queue,
                args(&[
                    (
                        "x-message-ttl",
                        AMQPValue::LongLongInt(delay.as_millis() as i64),
                    ),
                    ("x-dead-letter-exchange", text(&config.exchange())),
                    ("x-dead-letter-routing-key", text(NOTIFY)),
                ]),
            )
            .await?;
    }
    Ok(())
}
