//! `mixed-rates`: a small fabric whose cables run at the widths and
//! speeds ibsim models, 1x to 12x and SDR to HDR, so that both simulators
//! show the SMs the same PortInfo widths and speeds and the rates their
//! SAs give paths can be compared. Two 12-port switches joined by a 4x
//! EDR cable; on the first, hosts at 4x EDR, 4x FDR, 12x HDR, 4x HDR,
//! 4x QDR, 2x EDR, 1x FDR and 8x HDR; on the second, at 4x HDR, 4x DDR,
//! 1x SDR and 2x FDR.

use super::fat_tree::{ca_guid, switch_guid};
use super::{LinkRate, Topology, TopologyError};
use mad_core::attr::NodeType;

/// The hosts of each switch, by their cables' rates.
const HOSTS: [&[&str]; 2] = [
    &[
        "4xEDR", "4xFDR", "12xHDR", "4xHDR", "4xQDR", "2xEDR", "1xFDR", "8xHDR",
    ],
    &["4xHDR", "4xDDR", "1xSDR", "2xFDR"],
];

/// The `mixed-rates` fabric.
pub fn mixed_rates() -> Result<Topology, TopologyError> {
    let mut t = Topology::default();
    let rate = |s: &str| LinkRate::parse(s).map_err(TopologyError::BadParameter);
    for i in 0..2 {
        t.add_node(NodeType::Switch, 12, switch_guid(i), format!("S-{i}"), None);
    }
    t.connect((0, 12), (1, 12))?;
    t.set_rate((0, 12), rate("4xEDR")?)?;
    let mut h = 0;
    for (s, hosts) in HOSTS.iter().enumerate() {
        for (p, r) in hosts.iter().enumerate() {
            let n = t.add_node(
                NodeType::ChannelAdapter,
                1,
                ca_guid(h),
                format!("H-{h} {r}"),
                None,
            );
            t.connect((s, p as u8 + 1), (n, 1))?;
            t.set_rate((n, 1), rate(r)?)?;
            h += 1;
        }
    }
    Ok(t)
}
