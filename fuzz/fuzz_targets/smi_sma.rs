//! Arbitrary SMPs into the SMI and SMA of a channel adapter, a switch, a
//! vSwitch HCA and a two-port hypervisor managed at its PF ports
//! (VirtualizationInfo, VPortInfo, VPortPKeyTable). Nothing may panic; a refused request, or a
//! Get, changes no state.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mad_core::{Method, Smp, Status};
use smi::dr::{self, Disposition};
use smi::sma::hypervisor::Hypervisor;
use smi::sma::vswitch::VSwitchHca;
use smi::sma::{CaSma, NodeSpec, Sma, SwitchSma};
use std::sync::{Mutex, OnceLock};

fn run<const P: usize, const L: usize, const M: usize>(
    sma: &mut Sma<P, L, M>,
    smp: &Smp,
    port: u8,
) {
    let before = sma.model.clone();
    let mut s = smp.clone();
    if s.is_directed()
        && !matches!(
            dr::on_arrival(&mut s, &sma.model, port),
            Disposition::Deliver
        )
    {
        assert!(sma.model == before);
        return;
    }
    match sma.process(&s, port, 1) {
        Some(r) if r.status() == Status::OK && s.method() == Method::Set => {}
        Some(r) => {
            // The M_Key lease and counters may move on any SMP; nothing else.
            assert!(
                before.same_but_m_key_state(&sma.model),
                "{:?} changed the model",
                r.status()
            )
        }
        None => {}
    }
}

fuzz_target!(|data: &[u8]| {
    static SW: OnceLock<Mutex<Box<SwitchSma>>> = OnceLock::new();
    static HCA: OnceLock<Mutex<Box<VSwitchHca>>> = OnceLock::new();
    if data.len() < 2 + 256 {
        return;
    }
    let (kind, port) = (data[0] % 4, data[1]);
    let Ok(smp) = Smp::ref_from(&data[2..]) else {
        return;
    };
    match kind {
        0 => {
            let mut c = CaSma::new(&NodeSpec::ca(0x10, 2, "ca"));
            c.link_event(1, true, 0);
            run(&mut c, smp, port % 4);
        }
        1 => {
            let sw = SW.get_or_init(|| {
                let mut s = Box::new(SwitchSma::new(&NodeSpec::switch(0x20, 36, "sw")));
                for p in 1..=36 {
                    s.link_event(p, true, 0);
                }
                Mutex::new(s)
            });
            run(&mut **sw.lock().unwrap(), smp, port % 40);
        }
        2 => {
            // Two ports, each a vSwitch of its own; the SMP arrives at
            // either (or at a port it does not have).
            let mut h = Hypervisor::with_ports(0x30, 2, 4, "hyp");
            h.pf.link_event(1, true, 0);
            h.pf.link_event(2, true, 0);
            let at = port % 4;
            let mut s = smp.clone();
            if s.is_directed()
                && !matches!(
                    dr::on_arrival(&mut s, &h.pf.model, at),
                    Disposition::Deliver
                )
            {
                return;
            }
            let (model, vports) = (h.pf.model.clone(), format!("{:?}", h.vports));
            match h.process(&s, at, 1) {
                Some(r) if r.status() == Status::OK && s.method() == Method::Set => {}
                Some(r) => {
                    assert!(
                        model.same_but_m_key_state(&h.pf.model)
                            && vports == format!("{:?}", h.vports),
                        "{:?} changed the hypervisor",
                        r.status()
                    )
                }
                None => {}
            }
        }
        _ => {
            let h = HCA.get_or_init(|| {
                let mut h = Box::new(VSwitchHca::new(0x9000, 8));
                h.link_event(true, 0);
                Mutex::new(h)
            });
            let mut h = h.lock().unwrap();
            let _ = h.process(smp.clone(), 1);
            let _ = h.process_to_lid(smp, mad_core::Lid(u16::from(port)), 1);
        }
    }
});
