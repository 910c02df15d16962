//! One Kafka client connection: attributes it from the request header's client.id (or a SASL
//! PLAIN user) and counts produced records and bytes per tenant.

use proxy_wasm::traits::{Context, StreamContext};
use proxy_wasm::types::{Action, PeerType};
use weighstation_core::config::Protocol;
use weighstation_core::kafka::{
    sasl_plain_user, visit_produce, RequestHandler, RequestHeader, RequestStream, StreamOutcome, API_PRODUCE,
    API_SASL_AUTHENTICATE,
};

use crate::tenancy::{Attribution, Identity};

pub struct KafkaConn {
    stream: RequestStream,
    who: Attribution,
}

impl KafkaConn {
    pub fn new(hold_limit: usize) -> Self {
        KafkaConn {
            stream: RequestStream::new(hold_limit),
            who: Attribution::new(Protocol::Kafka),
        }
    }
}

struct Decide<'a> {
    who: &'a mut Attribution,
    refused: bool,
}

impl Decide<'_> {
    /// Attributes on the first request and whenever the client id or SASL user changes; the
    /// comparison avoids allocating on every request.
    fn observe(&mut self, client_id: Option<&[u8]>, sasl_user: Option<&[u8]>) {
        let (known_client, known_sasl) = match self.who.identity() {
            Identity::Kafka { client_id, sasl_user } => (client_id.as_deref(), sasl_user.as_deref()),
            _ => (None, None),
        };
        let client_same =
            matches!(self.who.identity(), Identity::Kafka { .. }) && known_client.map(str::as_bytes) == client_id;
        let sasl_same = sasl_user.is_none() || known_sasl.map(str::as_bytes) == sasl_user;
        if client_same && sasl_same {
            return;
        }
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let sasl = sasl_user.map(text).or_else(|| known_sasl.map(str::to_owned));
        if let Err(why) = self.who.connect(Identity::Kafka {
            client_id: client_id.map(text),
            sasl_user: sasl,
        }) {
            log::info!("weighstation: kafka connection refused: {why}");
            self.refused = true;
        }
    }
}

impl RequestHandler for Decide<'_> {
    fn request(&mut self, h: &RequestHeader<'_>, body: Option<&[u8]>) {
        let sasl = match (h.api_key, body) {
            (API_SASL_AUTHENTICATE, Some(b)) => sasl_plain_user(b, h.api_version),
            _ => None,
        };
        self.observe(h.client_id, sasl);
        if let (API_PRODUCE, Some(body)) = (h.api_key, body) {
            match visit_produce(body, h.api_version, |_| {}) {
                Ok(summary) => {
                    if let Some(who) = self.who.current() {
                        who.metrics.accepted(summary.records, summary.bytes);
                    }
                }
                Err(e) => log::debug!("weighstation: produce v{} not inspected: {e:?}", h.api_version),
            }
        }
    }
}

impl Context for KafkaConn {}

impl StreamContext for KafkaConn {
    fn on_downstream_data(&mut self, size: usize, _end_of_stream: bool) -> Action {
        if size == 0 {
            return Action::Continue;
        }
        let Some(buf) = self.get_downstream_data(0, size) else {
            return Action::Continue;
        };
        self.who.refresh();
        let mut decide = Decide {
            who: &mut self.who,
            refused: false,
        };
        let outcome = self.stream.process(&buf, &mut decide);
        if decide.refused {
            // Kafka has no way to say "too many connections": the broker's own answer is to close.
            self.close_downstream();
            return Action::Pause;
        }
        match outcome {
            StreamOutcome::Forward => Action::Continue,
            StreamOutcome::Hold => Action::Pause,
            StreamOutcome::Close(why) => {
                log::warn!("weighstation: closing kafka connection: {why}");
                self.close_downstream();
                Action::Pause
            }
        }
    }

    fn on_downstream_close(&mut self, _peer: PeerType) {
        self.who.closed();
    }
}
