/// Why a message was refused (or, in dryRun, would have been). The names are metric labels
/// (`reason`) and appear in the text a client receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    Size,
    Rate,
    InFlight,
    Queue,
    Connections,
    /// Not a matter of how much: the tenant may not do it (spec.permissions).
    Permission,
}

impl Reason {
    pub const ALL: [Reason; 6] = [
        Reason::Size,
        Reason::Rate,
        Reason::InFlight,
        Reason::Queue,
        Reason::Connections,
        Reason::Permission,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Size => "size",
            Reason::Rate => "rate",
            Reason::InFlight => "inflight",
            Reason::Queue => "queue",
            Reason::Connections => "connections",
            Reason::Permission => "permission",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}
