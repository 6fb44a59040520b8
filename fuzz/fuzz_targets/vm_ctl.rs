//! Arbitrary request lines to the SM's VM socket (`ibkit sm --vm-socket`,
//! `smd::vmctl`), carried out on a running vSwitch subnet: parsed without
//! a panic, and each one either refused with nothing changed or carried
//! out with the routes still whole. A GUID below 16 stands for the port
//! GUID of a hypervisor (modulo their number), so that creations and
//! migrations really happen.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smd::vmctl::{apply, VmCommand};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (mut f, mut sm, up) = fabric::sim::bring_up(
        "mport-ntree:4:2",
        fabric::sim::SimConfig {
            vfs: 2,
            ..Default::default()
        },
        smi::sm::SmConfig::default(),
    )
    .unwrap();
    assert!(up);
    let hyps: Vec<u64> = sm
        .hypervisors()
        .into_iter()
        .map(|i| sm.nodes()[i].info.port_guid.0)
        .collect();
    let host = |g: u64| {
        if g < 16 {
            hyps[g as usize % hyps.len()]
        } else {
            g
        }
    };
    for line in text.lines().take(16) {
        let Ok(cmd) = VmCommand::parse(line) else {
            continue;
        };
        let cmd = match cmd {
            VmCommand::Create { hypervisor, vguid } => VmCommand::Create {
                hypervisor: host(hypervisor),
                vguid,
            },
            VmCommand::Migrate { vguid, to } => VmCommand::Migrate {
                vguid,
                to: host(to),
            },
            c => c,
        };
        let before: Vec<(u32, smi::sm::Vm)> = sm.vms().map(|(id, v)| (id.0, *v)).collect();
        let lfts: Vec<Vec<u8>> = sm.lfts().map(|(_, l)| l.to_vec()).collect();
        match apply(&mut sm, &cmd) {
            Err(_) => {
                let after: Vec<(u32, smi::sm::Vm)> = sm.vms().map(|(id, v)| (id.0, *v)).collect();
                assert_eq!(before, after, "a refused {cmd:?} changed the VMs");
                let now: Vec<Vec<u8>> = sm.lfts().map(|(_, l)| l.to_vec()).collect();
                assert_eq!(lfts, now, "a refused {cmd:?} changed the routes");
                assert!(!sm.has_queued(), "a refused {cmd:?} queued SMPs");
            }
            Ok(_) => {
                assert!(f.run(&mut sm));
                let v = f.verify();
                assert_eq!((v.unreachable, v.loops), (0, 0), "after {cmd:?}: {v:?}");
            }
        }
    }
});
