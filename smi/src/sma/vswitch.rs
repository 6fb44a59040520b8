//! An HCA in vSwitch mode (Tasoulas et al.): behind its one physical port
//! sits a virtual switch; the virtual switch's port 1 is the uplink, port 2
//! the PF, ports 3.. the VFs. The PF and each VF are complete channel
//! adapters with their own LID and GUID, so to any SM the HCA looks like a
//! switch with nodes behind it. The virtual switch shares the PF's LID.

use super::{CaSma, NodeSpec, Sma};
use crate::dr::{self, Disposition};
use heapless::Vec;
use mad_core::attr::PortState;
use mad_core::{Lid, Smp};

/// VFs a vSwitch HCA can carry.
pub const MAX_VFS: usize = 32;
/// The virtual switch: uplink, PF and up to 32 VFs, full LID space.
pub type VSwitch = Sma<{ MAX_VFS + 3 }, 49152, 0>;

/// What became of an SMP that entered the HCA.
// The SMP travels by value: this crate has no allocator to box it.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Out {
    /// An SMP (usually the response) leaves by the physical port.
    Leave(Smp),
    /// Nothing leaves (dropped, or consumed without a response).
    Nothing(Option<dr::Discard>),
}

/// An HCA in vSwitch mode.
#[derive(Clone, Debug)]
pub struct VSwitchHca {
    /// The virtual switch.
    pub vswitch: VSwitch,
    /// The physical function.
    pub pf: CaSma,
    /// The virtual functions.
    pub vfs: Vec<CaSma, MAX_VFS>,
}

impl VSwitchHca {
    /// A vSwitch HCA with `vfs` VFs (at most [`MAX_VFS`]). GUIDs: the virtual switch
    /// takes `guid`, the PF `guid + 0x100`, VF i `guid + 0x200 + 0x10·i`.
    pub fn new(guid: u64, vfs: usize) -> Self {
        let n = vfs.min(MAX_VFS);
        let vsw = VSwitch::new(&NodeSpec::switch(guid, (n + 2) as u8, "vSwitch"));
        let pf = CaSma::new(&NodeSpec::ca(guid + 0x100, 1, "PF"));
        let mut v = Vec::new();
        for i in 0..n {
            let _ = v.push(CaSma::new(&NodeSpec::ca(
                guid + 0x200 + 0x10 * i as u64,
                1,
                "VF",
            )));
        }
        let mut hca = VSwitchHca {
            vswitch: vsw,
            pf,
            vfs: v,
        };
        // The internal links are always up.
        for p in 2..(n + 3) as u8 {
            hca.vswitch.link_event(p, true, 0);
        }
        hca.pf.link_event(1, true, 0);
        for vf in hca.vfs.iter_mut() {
            vf.link_event(1, true, 0);
        }
        hca
    }

    /// The physical link came up or went down.
    pub fn link_event(&mut self, up: bool, now_ms: u64) {
        self.vswitch.link_event(1, up, now_ms);
    }

    fn ca(&mut self, vsw_port: u8) -> Option<&mut CaSma> {
        match vsw_port {
            2 => Some(&mut self.pf),
            p if p >= 3 => self.vfs.get_mut(usize::from(p - 3)),
            _ => None,
        }
    }

    /// Runs an SMP that arrived on the physical port through the virtual
    /// switch and the functions behind it, as the hardware would.
    pub fn process(&mut self, mut smp: Smp, now_ms: u64) -> Out {
        if !smp.is_directed() {
            return self.process_lid_routed(smp, now_ms);
        }
        // At the virtual switch, from the uplink.
        match dr::on_arrival(&mut smp, &self.vswitch.model, 1) {
            Disposition::Deliver => self.answer_at_vswitch(&smp, 1, now_ms),
            Disposition::Forward(1) => Out::Leave(smp),
            Disposition::Forward(p) => self.through_function(smp, p, now_ms),
            Disposition::ForwardByLid(_) => Out::Nothing(None),
            Disposition::Discard(d) => Out::Nothing(Some(d)),
        }
    }

    fn answer_at_vswitch(&mut self, smp: &Smp, port: u8, now_ms: u64) -> Out {
        let before = self.vswitch.model.lid(0);
        let Some(mut r) = self.vswitch.process(smp, port, now_ms) else {
            return Out::Nothing(None);
        };
        let after = self.vswitch.model.lid(0);
        if after != before {
            self.share_lid(after, true);
        }
        match dr::originate(&mut r, &self.vswitch.model, port) {
            Ok(_) => Out::Leave(r),
            Err(d) => Out::Nothing(Some(d)),
        }
    }

    fn through_function(&mut self, mut smp: Smp, vport: u8, now_ms: u64) -> Out {
        let Some(ca) = self.ca(vport) else {
            return Out::Nothing(Some(dr::Discard::NoSuchPort(vport)));
        };
        let resp = match dr::on_arrival(&mut smp, &ca.model, 1) {
            Disposition::Deliver => {
                let before = ca.model.lid(1);
                let r = ca.process(&smp, 1, now_ms);
                let after = ca.model.lid(1);
                (r, before != after)
            }
            Disposition::Discard(d) => return Out::Nothing(Some(d)),
            _ => return Out::Nothing(None),
        };
        let (Some(mut r), lid_changed) = resp else {
            return Out::Nothing(None);
        };
        if lid_changed && vport == 2 {
            let lid = self.pf.model.lid(1);
            self.share_lid(lid, false);
        }
        let Some(ca) = self.ca(vport) else {
            return Out::Nothing(None);
        };
        if let Err(d) = dr::originate(&mut r, &ca.model, 1) {
            return Out::Nothing(Some(d));
        }
        // Back into the virtual switch on the function's port.
        match dr::on_arrival(&mut r, &self.vswitch.model, vport) {
            Disposition::Forward(1) => Out::Leave(r),
            Disposition::Discard(d) => Out::Nothing(Some(d)),
            _ => Out::Nothing(None),
        }
    }

    /// The virtual switch and the PF share one LID: a LID the SM gives
    /// either is mirrored to the other.
    fn share_lid(&mut self, lid: Lid, from_vswitch: bool) {
        if from_vswitch {
            if let Some(p) = self.pf.model.ports.get_mut(1) {
                p.info.lid = lid;
            }
        } else if let Some(p) = self.vswitch.model.ports.get_mut(0) {
            p.info.lid = lid;
        }
    }

    fn process_lid_routed(&mut self, smp: Smp, now_ms: u64) -> Out {
        // The SMI has no LRH here; a LID-routed SMP at the HCA is for the
        // function whose LID the request's DR fields do not carry, so the
        // caller addresses it with `process_to_lid`.
        let _ = (smp, now_ms);
        Out::Nothing(None)
    }

    /// A LID-routed SMP for `dlid` that arrived on the physical port:
    /// forwarded by the virtual switch's LFT to the function owning the LID
    /// (or the virtual switch itself), answered there.
    pub fn process_to_lid(&mut self, smp: &Smp, dlid: Lid, now_ms: u64) -> Out {
        let port = self.vswitch.model.lft_port(dlid);
        let r = match port {
            0 => self.vswitch.process(smp, 1, now_ms),
            p if p >= 2 => match self.ca(p) {
                Some(ca)
                    if ca
                        .model
                        .ports
                        .get(1)
                        .is_some_and(|x| x.info.port_state != PortState::Down) =>
                {
                    ca.process(smp, 1, now_ms)
                }
                _ => None,
            },
            _ => None,
        };
        match r {
            Some(r) => Out::Leave(r),
            None => Out::Nothing(None),
        }
    }
}
