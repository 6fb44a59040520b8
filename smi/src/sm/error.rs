//! Why the subnet manager stops, and what it could not reach.

use super::*;

/// Why the subnet manager stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SmError {
    /// The subnet needs more unicast LIDs than exist (0x0001–0xBFFF).
    LidSpaceExhausted {
        /// LIDs the subnet needs.
        needed: u32,
        /// Unicast LIDs there are.
        available: u32,
    },
    /// Requests went unanswered through every retry of every round: the
    /// fabric is not whole, and the SM did not route or activate it.
    Unreachable {
        /// What went unanswered, the first [`MAX_UNREACHED_NAMED`].
        unreached: Vec<Unreached>,
        /// How many went unanswered in all.
        count: usize,
        /// Bad M_Key traps (256) that named this SM's own M_Key: ports
        /// that hold another key refused its SMPs.
        m_key_refused: u64,
    },
}

/// The most [`Unreached`] an [`SmError::Unreachable`] names.
pub const MAX_UNREACHED_NAMED: usize = 8;

/// A request the SM sent, retried and finally gave up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreached {
    /// The attribute asked or set.
    pub attribute: AttributeId,
    /// Get or Set.
    pub method: Method,
    /// GUID of the node it was for, or of the node it went through (a
    /// NodeInfo sent beyond one of its ports); 0 when unknown.
    pub node_guid: u64,
    /// That node's description, when read.
    pub node_description: Option<String>,
    /// The port concerned, where there is one.
    pub port: Option<u8>,
    /// True for a NodeInfo sent beyond `port`: the node there went unseen.
    pub beyond: bool,
}

impl core::fmt::Display for Unreached {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.method.name().unwrap_or("?");
        let a = self.attribute.name().unwrap_or("?");
        write!(f, "{m}({a})")?;
        if self.beyond {
            f.write_str(" beyond")?;
        } else {
            f.write_str(" of")?;
        }
        if let Some(p) = self.port {
            write!(f, " port {p} of")?;
        }
        match &self.node_description {
            Some(d) => write!(f, " {d:?} ({:#018x})", self.node_guid),
            None => write!(f, " node {:#018x}", self.node_guid),
        }
    }
}

impl core::fmt::Display for SmError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SmError::LidSpaceExhausted { needed, available } => write!(
                f,
                "the subnet needs {needed} LIDs but only {available} unicast LIDs exist; nothing was assigned"
            ),
            SmError::Unreachable {
                unreached,
                count,
                m_key_refused,
            } => {
                write!(
                    f,
                    "{count} requests went unanswered through every retry; the fabric was not routed or activated: "
                )?;
                for (i, u) in unreached.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{u}")?;
                }
                if *count > unreached.len() {
                    write!(f, "; and {} more", count - unreached.len())?;
                }
                if *m_key_refused > 0 {
                    write!(
                        f,
                        ". {m_key_refused} bad M_Key trap(s) named this SM's M_Key: ports hold another key (give the SM theirs, as guid2mkey in its cache directory, or wait out their lease)"
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl core::error::Error for SmError {}
