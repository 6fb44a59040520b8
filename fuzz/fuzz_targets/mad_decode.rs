//! Arbitrary bytes into every decoder of mad-core: the SMP view and its
//! header checks, every attribute by every attribute ID and modifier, the
//! Notice and its trap details, the SA MAD and every SA record by its
//! attribute ID, PerfMgt's PortCounters, PortCountersExtended and the two
//! details attributes. Nothing
//! may panic; whatever decodes must re-encode and decode to the same
//! value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mad_core::notice::{Notice, TrapDetails};
use mad_core::perf::{
    PortCounters, PortCountersExtended, PortRcvErrorDetails, PortSamplesControl, PortSamplesResult,
    PortSamplesResultExtended, PortXmitDiscardDetails,
};
use mad_core::sa::{AnyRecord, SaAttributeId, SaMad};
use mad_core::{AnyAttribute, AttributeId, Smp};

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let id = AttributeId::from(u16::from_be_bytes([data[0], data[1]]));
    let am = u32::from_be_bytes([data[2], data[3], data[4], data[5]]);
    let body = &data[6..];

    if let Ok(s) = Smp::parse(body) {
        let _ = format!("{s:?}");
        let _ = (s.initial_path(), s.return_path(), s.status(), s.direction());
        let _ = s.attribute().map(|a| a.check());
    }
    if let Ok(a) = AnyAttribute::decode(id, am, body) {
        let _ = a.check();
        let _ = format!("{a:?}");
        let mut out = [0u8; 64];
        let (id2, am2) = a.encode(&mut out).expect("a decoded attribute re-encodes");
        assert_eq!((id2, am2), (id, am));
        assert_eq!(AnyAttribute::decode(id, am, &out).expect("re-decodes"), a);
    }
    if let Ok(n) = Notice::decode(body) {
        if let Ok(d) = n.details() {
            let mut out = [0u8; 54];
            d.encode(&mut out).expect("trap details re-encode");
            assert_eq!(TrapDetails::decode(n.trap_number(), &out).unwrap(), d);
        }
    }
    if let Ok(m) = SaMad::parse(body) {
        let _ = format!("{m:?}");
        assert_eq!(SaMad::parse(&m.to_bytes()).expect("an SA MAD re-parses"), m);
        for r in m.records() {
            let _ = r.map(|r| format!("{r:?}"));
        }
    }
    if let Some(Ok(r)) = AnyRecord::decode(SaAttributeId::from(u16::from(id)), body) {
        let _ = format!("{r:?}");
    }
    if let Ok(c) = PortCounters::decode(body) {
        let b = c.to_bytes().expect("PortCounters re-encodes");
        assert_eq!(PortCounters::decode(&b).unwrap(), c);
    }
    if let Ok(c) = PortCountersExtended::decode(body) {
        let b = c.to_bytes().expect("PortCountersExtended re-encodes");
        assert_eq!(PortCountersExtended::decode(&b).unwrap(), c);
    }
    if let Ok(c) = PortRcvErrorDetails::decode(body) {
        let b = c.to_bytes().expect("PortRcvErrorDetails re-encodes");
        assert_eq!(PortRcvErrorDetails::decode(&b).unwrap(), c);
    }
    if let Ok(c) = PortXmitDiscardDetails::decode(body) {
        let b = c.to_bytes().expect("PortXmitDiscardDetails re-encodes");
        assert_eq!(PortXmitDiscardDetails::decode(&b).unwrap(), c);
    }
    if let Ok(c) = PortSamplesControl::decode(body) {
        let b = c.to_bytes().expect("PortSamplesControl re-encodes");
        assert_eq!(PortSamplesControl::decode(&b).unwrap(), c);
    }
    if let Ok(c) = PortSamplesResult::decode(body) {
        let b = c.to_bytes().expect("PortSamplesResult re-encodes");
        assert_eq!(PortSamplesResult::decode(&b).unwrap(), c);
    }
    if let Ok(c) = PortSamplesResultExtended::decode(body) {
        let b = c.to_bytes().expect("PortSamplesResultExtended re-encodes");
        assert_eq!(PortSamplesResultExtended::decode(&b).unwrap(), c);
    }
});
