//! Metadata by what the tenant may see (weighstation_core::kafka::authz::filter_metadata): the
//! response loses the topics the tenant may neither produce to nor consume from, or answers
//! them TOPIC_AUTHORIZATION_FAILED where the request named them; a request that would
//! auto-create a topic the tenant may not see or create goes to the broker without
//! allow_auto_topic_creation. DescribeTopicPartitions (Admin describeTopics) is filtered the
//! same way. A tenant without those lists passes as before.

use weighstation_core::kafka::authz::{
    describes_all_topics, filter_metadata, filter_topic_partitions, metadata_request,
};
use weighstation_core::kafka::{request_frame, RequestHeader, API_METADATA};
use weighstation_core::scan::Admission;
use weighstation_core::source::Source;

use crate::kafka_conn::{Conn, Pending};

/// The highest Metadata version whose topics the filter reads (the ApiVersions answer caps it).
const MAX_METADATA_VERSION: i16 = 12;
const FIRST_FLEXIBLE_METADATA: i16 = 9;

impl Conn {
    pub(in crate::kafka_conn) fn metadata(&mut self, h: &RequestHeader<'_>, body: &mut dyn Source) -> Admission {
        self.who.ensure_attributed();
        let addresses = self.rewrites_brokers();
        let grants = self.who.current().and_then(|w| w.tenant()).map(|t| &t.permissions);
        let Some(grants) = grants.filter(|g| g.limits_topics() || g.create_topics.is_some()) else {
            if addresses {
                let p = Pending::Addresses {
                    api_key: API_METADATA,
                    version: h.api_version,
                };
                self.pending.insert(h.correlation_id, p);
            }
            return Admission::Forward;
        };
        if h.api_version > MAX_METADATA_VERSION {
            log::info!(
                "weighstation: kafka Metadata v{} closes the connection: above the version the gateway advertises",
                h.api_version
            );
            return Admission::Close(Vec::new());
        }
        let Some(ask) = metadata_request(body.all(), h.api_version, grants) else {
            log::info!("weighstation: kafka Metadata request closes the connection: malformed");
            return Admission::Close(Vec::new());
        };
        self.pending.insert(
            h.correlation_id,
            Pending::Metadata {
                version: h.api_version,
                all_topics: ask.all_topics,
                addresses,
            },
        );
        let Some(at) = ask.clear_auto_create else {
            return Admission::Forward;
        };
        let mut patched = body.all().to_vec();
        patched[at] = 0;
        let flexible = h.api_version >= FIRST_FLEXIBLE_METADATA;
        Admission::Replace(request_frame(
            h.api_key,
            h.api_version,
            h.correlation_id,
            h.client_id,
            flexible,
            &patched,
        ))
    }

    /// A DescribeTopicPartitions request: its response filtered as Metadata's.
    pub(in crate::kafka_conn) fn describe_topic_partitions(&mut self, h: &RequestHeader<'_>, body: &[u8]) -> Admission {
        let limited = self
            .who
            .current()
            .and_then(|w| w.tenant())
            .is_some_and(|t| t.permissions.limits_topics());
        if !limited {
            return Admission::Forward;
        }
        let Some(all_topics) = describes_all_topics(body) else {
            log::info!("weighstation: kafka DescribeTopicPartitions request closes the connection: malformed");
            return Admission::Close(Vec::new());
        };
        self.pending
            .insert(h.correlation_id, Pending::TopicPartitions { all_topics });
        Admission::Forward
    }

    /// A DescribeTopicPartitions response, filtered.
    pub(in crate::kafka_conn) fn topic_partitions_answered(
        &mut self,
        frame: &[u8],
        all_topics: bool,
    ) -> Option<Vec<u8>> {
        let grants = &self.who.current()?.tenant()?.permissions;
        let filtered = filter_topic_partitions(frame, all_topics, grants)?;
        self.refused_topics(filtered.refused, "DescribeTopicPartitions");
        Some(filtered.frame)
    }

    /// Counts and logs the topics a response answered TOPIC_AUTHORIZATION_FAILED.
    fn refused_topics(&self, topics: Vec<Vec<u8>>, api: &str) {
        for topic in topics {
            let detail = format!(
                "{api} of topic {} not granted (spec.permissions.kafka.produce, consume)",
                String::from_utf8_lossy(&topic)
            );
            self.refused_permission(&detail, topic);
        }
    }

    /// A Metadata response: its addresses rewritten, then its topics filtered.
    pub(in crate::kafka_conn) fn metadata_answered(
        &mut self,
        frame: &[u8],
        version: i16,
        all_topics: bool,
        addresses: bool,
    ) -> Option<Vec<u8>> {
        let rewritten = if addresses {
            self.rewrite_addresses(frame, API_METADATA, version)
        } else {
            None
        };
        let current = rewritten.as_deref().unwrap_or(frame);
        let grants = &self.who.current()?.tenant()?.permissions;
        let Some(filtered) = filter_metadata(current, version, all_topics, grants) else {
            return rewritten;
        };
        self.refused_topics(filtered.refused, "Metadata");
        Some(filtered.frame)
    }
}
