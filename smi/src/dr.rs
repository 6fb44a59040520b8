//! The directed-route SMI rules (IBA 14.2.2, C14-9 for the outbound path and
//! C14-13 for the return path) as pure functions over an SMP.
//!
//! Each node's SMI runs [`receive`] on an SMP that arrived on a port and
//! [`send`] on one it puts on a port; [`on_arrival`] chains them as a node
//! does and says what happens next: deliver to the local SMA or SM, forward
//! out of a port, continue LID-routed, or discard — with the reason.

use mad_core::{Lid, Smp};

/// What the SMI needs to know about the node it runs on.
pub trait Node {
    /// True for a switch (only switches relay directed-route SMPs).
    fn is_switch(&self) -> bool;
    /// Physical ports (a switch's port 0 not counted).
    fn num_ports(&self) -> u8;
    /// Whether the link on `port` can carry an SMP (a switch's port 0 always can).
    fn port_up(&self, port: u8) -> bool;
}

/// Why an SMP is discarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discard {
    /// Not a directed-route SMP (class 0x81).
    NotDirected,
    /// HopCount above 63 (C14-6).
    HopCountTooLarge,
    /// Outbound with HopCount ≠ 0 and HopPointer 0 on arrival (C14-9:1).
    HopPointerZero,
    /// A channel adapter cannot relay (C14-9:2, C14-13:2).
    NotASwitch,
    /// The path names a port the node does not have.
    NoSuchPort(u8),
    /// The path names a port whose link is down.
    PortDown(u8),
    /// The SMP is to leave by the port the path names, but another was used.
    WrongPort {
        /// The port the path names.
        path: u8,
        /// The port used.
        actual: u8,
    },
    /// The directed part ends at a channel adapter but DrDLID is not permissive (C14-9:3).
    LidRoutedAfterCa,
    /// A response reached the end of its directed part at a channel
    /// adapter but DrSLID is not permissive (C14-13:3).
    LidRoutedBeforeCa,
    /// HopPointer outside every rule (C14-9:5, C14-13:5).
    BadHopPointer,
}

/// What the SMI of the receiving node does with an SMP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Hand to the local SMA (a request) or SM (a response).
    Deliver,
    /// Send out of this port; the send-side rules have been applied.
    Forward(u8),
    /// The directed part is over: route by LID towards this LID
    /// (DrDLID for requests, DrSLID for responses).
    ForwardByLid(Lid),
    /// Drop it.
    Discard(Discard),
}

fn precheck(smp: &Smp) -> Result<(), Discard> {
    if !smp.is_directed() {
        Err(Discard::NotDirected)
    } else if smp.hop_count() > 63 {
        Err(Discard::HopCountTooLarge)
    } else {
        Ok(())
    }
}

fn path_port(node: &dyn Node, port: u8) -> Result<(), Discard> {
    // Port 0 is a switch's management port, not a link: a path cannot
    // leave through it.
    if port == 0 || port > node.num_ports() {
        Err(Discard::NoSuchPort(port))
    } else if !node.port_up(port) {
        Err(Discard::PortDown(port))
    } else {
        Ok(())
    }
}

/// The port an SMP uses must be the one its path names.
fn same_port(path: u8, actual: u8) -> Result<(), Discard> {
    if path == actual {
        Ok(())
    } else {
        Err(Discard::WrongPort { path, actual })
    }
}

fn idx(i: u8) -> usize {
    usize::from(i & 63)
}

/// Receive-side rules for an SMP that arrived on `port` (C14-9, C14-13):
/// fills ReturnPath on the outbound path, adjusts HopPointer where the rules
/// say so, and checks that the next hop exists.
pub fn receive(smp: &mut Smp, node: &dyn Node, port: u8) -> Result<(), Discard> {
    precheck(smp)?;
    let (hp, hc) = (smp.hop_pointer(), smp.hop_count());
    if !smp.direction() {
        if hc != 0 && hp == 0 {
            return Err(Discard::HopPointerZero);
        }
        if hp != 0 && hp < hc {
            if !node.is_switch() {
                return Err(Discard::NotASwitch);
            }
            smp.return_path[idx(hp)] = port;
            let next = smp.initial_path[idx(hp + 1)];
            return path_port(node, next);
        }
        if hp == hc {
            if hc != 0 {
                smp.return_path[idx(hp)] = port;
            }
            return if node.is_switch() || smp.dr_dlid().is_permissive() {
                Ok(())
            } else {
                Err(Discard::LidRoutedAfterCa)
            };
        }
        if u16::from(hp) == u16::from(hc) + 1 {
            return Ok(());
        }
        Err(Discard::BadHopPointer)
    } else {
        if hc != 0 && u16::from(hp) == u16::from(hc) + 1 {
            // The response comes off a LID-routed part. A switch ending the
            // directed part relays it (the send rules step the pointer); a
            // CA applies the kernel's check of the arrival port.
            if node.is_switch() {
                return path_port(node, smp.return_path[idx(hc)]);
            }
            smp.set_hop_pointer(hp - 1);
            return same_port(smp.return_path[idx(hp - 1)], port);
        }
        if hp >= 2 && hp <= hc {
            if !node.is_switch() {
                return Err(Discard::NotASwitch);
            }
            let next = smp.return_path[idx(hp - 1)];
            return path_port(node, next);
        }
        if hp == 1 {
            if smp.dr_slid().is_permissive() {
                smp.set_hop_pointer(0);
                return Ok(());
            }
            return if node.is_switch() {
                Ok(())
            } else {
                Err(Discard::LidRoutedBeforeCa)
            };
        }
        if hp == 0 {
            return Ok(());
        }
        Err(Discard::BadHopPointer)
    }
}

/// Send-side rules for an SMP put on `port` (C14-9, C14-13): advances the
/// HopPointer and checks the SMP leaves by the port its path names.
pub fn send(smp: &mut Smp, node: &dyn Node, port: u8) -> Result<(), Discard> {
    precheck(smp)?;
    let (hp, hc) = (smp.hop_pointer(), smp.hop_count());
    if !smp.direction() {
        if hc != 0 && hp == 0 {
            smp.set_hop_pointer(1);
            return same_port(smp.initial_path[1], port);
        }
        if hp != 0 && hp < hc {
            if !node.is_switch() {
                return Err(Discard::NotASwitch);
            }
            smp.set_hop_pointer(hp + 1);
            return same_port(smp.initial_path[idx(hp + 1)], port);
        }
        if hp == hc {
            smp.set_hop_pointer(hp + 1);
            return if node.is_switch() || smp.dr_dlid().is_permissive() {
                Ok(())
            } else {
                Err(Discard::LidRoutedAfterCa)
            };
        }
        if u16::from(hp) == u16::from(hc) + 1 {
            return Ok(());
        }
        Err(Discard::BadHopPointer)
    } else {
        if hc != 0 && u16::from(hp) == u16::from(hc) + 1 {
            smp.set_hop_pointer(hp - 1);
            return same_port(smp.return_path[idx(hp - 1)], port);
        }
        if hp >= 2 && hp <= hc {
            if !node.is_switch() {
                return Err(Discard::NotASwitch);
            }
            smp.set_hop_pointer(hp - 1);
            return same_port(smp.return_path[idx(hp - 1)], port);
        }
        if hp == 1 {
            smp.set_hop_pointer(0);
            return if node.is_switch() || smp.dr_slid().is_permissive() {
                Ok(())
            } else {
                Err(Discard::LidRoutedBeforeCa)
            };
        }
        if hp == 0 {
            return Ok(());
        }
        Err(Discard::BadHopPointer)
    }
}

/// True when the SMP has reached the node it is for: a request at
/// HopPointer = HopCount + 1, a response back at HopPointer 0.
pub fn is_for_local(smp: &Smp) -> bool {
    if smp.direction() {
        smp.hop_pointer() == 0
    } else {
        u16::from(smp.hop_pointer()) == u16::from(smp.hop_count()) + 1
    }
}

/// The port the SMP leaves by next (InitialPath[hp + 1] outbound,
/// ReturnPath[hp − 1] on the way back).
pub fn next_port(smp: &Smp) -> u8 {
    let hp = smp.hop_pointer();
    if smp.direction() {
        smp.return_path[idx(hp.wrapping_sub(1))]
    } else {
        smp.initial_path[idx(hp.wrapping_add(1))]
    }
}

/// Everything a node's SMI does with an SMP that arrived on `port`: the
/// receive rules, then deliver, relay (with the send rules applied for the
/// egress port), turn into LID routing, or discard.
pub fn on_arrival(smp: &mut Smp, node: &dyn Node, port: u8) -> Disposition {
    if let Err(d) = receive(smp, node, port) {
        return Disposition::Discard(d);
    }
    let (hp, hc) = (smp.hop_pointer(), smp.hop_count());
    if !smp.direction() {
        if hp != 0 && hp < hc {
            let out = next_port(smp);
            return match send(smp, node, out) {
                Ok(()) => Disposition::Forward(out),
                Err(d) => Disposition::Discard(d),
            };
        }
        if hp == hc {
            if !smp.dr_dlid().is_permissive() {
                // End of the directed part at a switch: the rest is LID-routed.
                smp.set_hop_pointer(hp + 1);
                return Disposition::ForwardByLid(smp.dr_dlid());
            }
            return match send(smp, node, port) {
                Ok(()) if is_for_local(smp) => Disposition::Deliver,
                Ok(()) => Disposition::Discard(Discard::BadHopPointer),
                Err(d) => Disposition::Discard(d),
            };
        }
        Disposition::Deliver
    } else {
        if hc != 0 && u16::from(hp) == u16::from(hc) + 1 {
            // Start of the directed return part at this switch.
            let out = smp.return_path[idx(hc)];
            return match send(smp, node, out) {
                Ok(()) => Disposition::Forward(out),
                Err(d) => Disposition::Discard(d),
            };
        }
        if hp >= 2 && hp <= hc {
            let out = next_port(smp);
            return match send(smp, node, out) {
                Ok(()) => Disposition::Forward(out),
                Err(d) => Disposition::Discard(d),
            };
        }
        if hp == 1 && !smp.dr_slid().is_permissive() {
            // End of the directed part of a response: LID-route to the requester.
            smp.set_hop_pointer(0);
            return Disposition::ForwardByLid(smp.dr_slid());
        }
        Disposition::Deliver
    }
}

/// Prepares a directed-route SMP that the local SM or SMA puts on `port`:
/// where the directed part starts here, the send rules are applied;
/// returns whether the SMP is consumed locally instead of going on the wire
/// (a zero-hop request or a response already home).
pub fn originate(smp: &mut Smp, node: &dyn Node, port: u8) -> Result<bool, Discard> {
    precheck(smp)?;
    let starts_here = if smp.direction() {
        smp.dr_dlid().is_permissive()
    } else {
        smp.dr_slid().is_permissive()
    };
    if starts_here {
        send(smp, node, port)?;
    }
    Ok(is_for_local(smp))
}

/// Turns a delivered request into its response in place: method GetResp,
/// the D bit set; the SMA fills status and data.
pub fn make_response(smp: &mut Smp) {
    smp.header.method = mad_core::Method::GetResp.into();
    if smp.is_directed() {
        smp.set_direction(true);
    }
}

#[cfg(test)]
mod tests;
