//! A worker's busiest clients of each tenant with client limits, per report period: what the
//! usage export's client rows, `top --tenant` and a LimitPolicy's status are made of.

use serde::Serialize;

/// How many clients a tenant's table keeps.
const TOP_CLIENTS: usize = 8;

/// A client's name is kept to this many bytes (a Kafka client.id may be 32 KiB).
const NAME_BYTES: usize = 255;

/// The busiest clients by the Space-Saving algorithm over their traffic (messages admitted and
/// refused): a client not in a full table replaces the one with the least traffic and inherits
/// that weight, so a client whose traffic is over 1/8 of the tenant's is always in the table. A
/// client's counts are exact since it entered the table (all it did, for one never replaced:
/// every client, while a tenant has no more than eight).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopClients(Vec<ClientCount>);

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClientCount {
    pub client: String,
    pub messages: u64,
    pub bytes: u64,
    pub refused: u64,
    #[serde(skip)]
    weight: u64,
}

impl TopClients {
    /// Messages of the client the gateway let through.
    pub fn admitted(&mut self, client: &[u8], messages: u64, bytes: u64) {
        let e = self.entry(client, messages);
        e.messages = e.messages.saturating_add(messages);
        e.bytes = e.bytes.saturating_add(bytes);
    }

    /// Messages of the client the gateway refused.
    pub fn refused(&mut self, client: &[u8], messages: u64) {
        let e = self.entry(client, messages);
        e.refused = e.refused.saturating_add(messages);
    }

    fn entry(&mut self, client: &[u8], weight: u64) -> &mut ClientCount {
        let client = &client[..client.len().min(NAME_BYTES)];
        let entries = &mut self.0;
        let i = match entries.iter().position(|e| e.client.as_bytes() == client) {
            Some(i) => i,
            None if entries.len() < TOP_CLIENTS => {
                entries.push(ClientCount {
                    client: String::from_utf8_lossy(client).into_owned(),
                    ..ClientCount::default()
                });
                entries.len() - 1
            }
            None => {
                let i = (0..entries.len()).min_by_key(|&i| entries[i].weight).unwrap_or(0);
                let e = &mut entries[i];
                e.client.clear();
                e.client.push_str(&String::from_utf8_lossy(client));
                (e.messages, e.bytes, e.refused) = (0, 0, 0);
                i
            }
        };
        let e = &mut entries[i];
        e.weight = e.weight.saturating_add(weight);
        e
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    pub fn entries(&self) -> &[ClientCount] {
        &self.0
    }
}

impl Serialize for TopClients {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_reported_by_name_with_what_they_sent_and_were_refused() {
        let mut top = TopClients::default();
        top.refused(b"billing-a", 40);
        top.admitted(b"billing-b", 2, 200);
        top.admitted(b"billing-a", 1, 10);
        assert_eq!(
            serde_json::to_value(&top).unwrap(),
            serde_json::json!([
                {"client": "billing-a", "messages": 1, "bytes": 10, "refused": 40},
                {"client": "billing-b", "messages": 2, "bytes": 200, "refused": 0}
            ])
        );
    }

    #[test]
    fn a_heavy_client_stays_counted_exactly_and_a_newcomer_counts_from_its_entry() {
        let mut top = TopClients::default();
        for i in 0..1000u64 {
            top.admitted(b"runaway", 5, 50);
            top.admitted(format!("once-{i}").as_bytes(), 1, 10);
        }
        let runaway = top.entries().iter().find(|e| e.client == "runaway").unwrap();
        assert_eq!((runaway.messages, runaway.bytes), (5000, 50_000));
        assert_eq!(top.entries().len(), TOP_CLIENTS);
        for e in top.entries().iter().filter(|e| e.client != "runaway") {
            assert_eq!(
                (e.messages, e.bytes),
                (1, 10),
                "{}: counted since it entered, never more",
                e.client
            );
        }
    }
}
