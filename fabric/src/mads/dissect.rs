//! MADs dissected for people (an indented field-per-line dump) and for
//! programs (one JSON object per MAD), both from mad-core's field visitors:
//! the MAD header, the SMP header, the attribute with its modifier, a
//! notice's trap details, and whether the attribute's values are valid
//! where they carry meaning; an SA MAD's RMPP and SA headers and records;
//! a PerfMgt MAD's ClassPortInfo, PortCounters, PortCountersExtended,
//! PortRcvErrorDetails, PortXmitDiscardDetails, PortSamplesControl,
//! PortSamplesResult or PortSamplesResultExtended.

use mad_core::field::{Fields, Value};
use mad_core::mad::{MadHeader, MgmtClass};
use mad_core::sa::SaMad;
use mad_core::smp::SmpHeaderFields;
use mad_core::{Smp, MAD_SIZE};
use serde_json::{json, Map, Value as Json};
use std::fmt::Write;

/// A MAD as read from the input: its bytes and where it came from.
pub struct Mad<'a> {
    /// 256 bytes.
    pub bytes: &'a [u8; MAD_SIZE],
    /// "line 3" or "packet 7".
    pub origin: String,
}

/// A value as JSON: numbers as numbers, 64-bit identifiers and GIDs as
/// `0x…` strings, text as a string, tables as arrays, records as objects.
pub fn to_json(v: &Value<'_>) -> Json {
    match *v {
        Value::Num { v, .. } => json!(v),
        Value::Bool(b) => json!(b),
        Value::Id64(v) => json!(format!("{v:#018x}")),
        Value::Gid(g) => json!(g.to_string()),
        Value::Enum { raw, .. } | Value::Flags { raw, .. } => json!(raw),
        Value::Text(t) => {
            let end = t.iter().position(|&b| b == 0).unwrap_or(t.len());
            json!(String::from_utf8_lossy(&t[..end]))
        }
        Value::Bytes(b) => json!(hex(b)),
        Value::List(l) => Json::Array(
            (0..l.len())
                .filter_map(|i| l.item(i))
                .map(|x| to_json(&x))
                .collect(),
        ),
        Value::Record(r) => Json::Object(fields_json(r)),
    }
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * b.len());
    s.push_str("0x");
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// Every field of a record as a JSON object, in wire order.
pub fn fields_json(f: &dyn Fields) -> Map<String, Json> {
    let mut m = Map::new();
    f.visit(&mut |n, v| {
        m.insert(n.to_string(), to_json(&v));
    });
    m
}

/// A PerfMgt MAD's attribute (IBA 16.1), decoded from its data area:
/// its name and fields, or why it is not.
fn perf_attribute(
    hdr: &MadHeader,
    bytes: &[u8],
) -> Result<(&'static str, Box<dyn Fields>), String> {
    use mad_core::perf::{
        self, PortCounters, PortCountersExtended, PortRcvErrorDetails, PortSamplesControl,
        PortSamplesResult, PortSamplesResultExtended, PortXmitDiscardDetails,
    };
    let data = &bytes[perf::DATA_OFFSET..];
    let e = |e: mad_core::Error| e.to_string();
    match hdr.attribute_id.get() {
        perf::ATTR_CLASS_PORT_INFO => Ok((
            "ClassPortInfo",
            Box::new(mad_core::sa::ClassPortInfo::decode(data).map_err(e)?),
        )),
        perf::ATTR_PORT_COUNTERS => Ok((
            "PortCounters",
            Box::new(PortCounters::decode(data).map_err(e)?),
        )),
        perf::ATTR_PORT_COUNTERS_EXTENDED => Ok((
            "PortCountersExtended",
            Box::new(PortCountersExtended::decode(data).map_err(e)?),
        )),
        perf::ATTR_PORT_RCV_ERROR_DETAILS => Ok((
            "PortRcvErrorDetails",
            Box::new(PortRcvErrorDetails::decode(data).map_err(e)?),
        )),
        perf::ATTR_PORT_XMIT_DISCARD_DETAILS => Ok((
            "PortXmitDiscardDetails",
            Box::new(PortXmitDiscardDetails::decode(data).map_err(e)?),
        )),
        perf::ATTR_PORT_SAMPLES_CONTROL => Ok((
            "PortSamplesControl",
            Box::new(PortSamplesControl::decode(data).map_err(e)?),
        )),
        perf::ATTR_PORT_SAMPLES_RESULT => Ok((
            "PortSamplesResult",
            Box::new(PortSamplesResult::decode(data).map_err(e)?),
        )),
        perf::ATTR_PORT_SAMPLES_RESULT_EXTENDED => Ok((
            "PortSamplesResultExtended",
            Box::new(PortSamplesResultExtended::decode(data).map_err(e)?),
        )),
        id => Err(format!("PerfMgt attribute {id:#06x} is not decoded")),
    }
}

/// The JSON object for one MAD: `mad`, then `smp` and `attribute` (SMP
/// classes), `rmpp`, `sa` and `records` (the SA), or `attribute`
/// (PerfMgt).
pub fn mad_json(m: &Mad<'_>) -> Json {
    let mut o = Map::new();
    let hdr = match MadHeader::ref_from(m.bytes) {
        Ok(h) => h,
        Err(e) => return json!({ "error": e.to_string() }),
    };
    o.insert("mad".into(), Json::Object(fields_json(hdr)));
    if hdr.mgmt_class == mad_core::perf::PERF_CLASS {
        match perf_attribute(hdr, m.bytes) {
            Ok((name, f)) => {
                let mut a = Map::new();
                a.insert("name".into(), json!(name));
                a.extend(fields_json(f.as_ref()));
                o.insert("attribute".into(), Json::Object(a));
            }
            Err(e) => {
                o.insert("error".into(), json!(e));
            }
        }
        return Json::Object(o);
    }
    if hdr.mgmt_class == u8::from(MgmtClass::SubnAdm) {
        match SaMad::parse(m.bytes) {
            Ok(sa) => {
                o.insert("rmpp".into(), Json::Object(fields_json(&sa.rmpp)));
                o.insert("sa".into(), Json::Object(fields_json(&sa.sa)));
                let records: Vec<Json> = sa
                    .records()
                    .map(|r| match r {
                        Ok(r) => {
                            let mut f = Map::new();
                            f.insert("name".into(), json!(r.name()));
                            f.extend(fields_json(r.fields()));
                            Json::Object(f)
                        }
                        Err(e) => json!({ "error": e.to_string() }),
                    })
                    .collect();
                o.insert("records".into(), Json::Array(records));
            }
            Err(e) => {
                o.insert("error".into(), json!(format!("not a valid SA MAD: {e}")));
            }
        }
        return Json::Object(o);
    }
    match Smp::parse(m.bytes) {
        Ok(s) => {
            o.insert("smp".into(), Json::Object(fields_json(&SmpHeaderFields(s))));
            o.insert("attribute".into(), attribute_json(s));
        }
        Err(e) => {
            o.insert("error".into(), json!(format!("not a valid SMP: {e}")));
        }
    }
    Json::Object(o)
}

fn attribute_json(s: &Smp) -> Json {
    let mut a = Map::new();
    match s.attribute() {
        Ok(attr) => {
            a.insert("name".into(), json!(attr.name()));
            let (modifier, value) = attr.parts();
            a.insert("modifier".into(), Json::Object(fields_json(modifier)));
            a.extend(fields_json(value));
            if let mad_core::AnyAttribute::Notice(_, n) = &attr {
                if let Ok(d) = n.details() {
                    a.insert("trap_details".into(), Json::Object(fields_json(d.fields())));
                }
            }
            if let Err(e) = check(s, &attr) {
                a.insert("invalid".into(), json!(e.to_string()));
            }
        }
        Err(e) => {
            a.insert("id".into(), json!(u16::from(s.attribute_id())));
            a.insert("error".into(), json!(e.to_string()));
        }
    }
    Json::Object(a)
}

/// The text dump of one MAD.
pub fn mad_text(m: &Mad<'_>, index: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "MAD {index} ({})", m.origin);
    let hdr = match MadHeader::ref_from(m.bytes) {
        Ok(h) => h,
        Err(e) => {
            let _ = writeln!(out, "  error: {e}");
            return out;
        }
    };
    section(&mut out, "MAD header", hdr);
    if hdr.mgmt_class == mad_core::perf::PERF_CLASS {
        match perf_attribute(hdr, m.bytes) {
            Ok((name, f)) => section(&mut out, name, f.as_ref()),
            Err(e) => {
                let _ = writeln!(out, "  {e}");
            }
        }
        return out;
    }
    if hdr.mgmt_class == u8::from(MgmtClass::SubnAdm) {
        match SaMad::parse(m.bytes) {
            Ok(sa) => {
                section(&mut out, "RMPP header", &sa.rmpp);
                section(&mut out, "SA header", &sa.sa);
                for (i, r) in sa.records().enumerate() {
                    match r {
                        Ok(r) => section(&mut out, &format!("{} {}", r.name(), i + 1), r.fields()),
                        Err(e) => {
                            let _ = writeln!(out, "  record {}: error: {e}", i + 1);
                        }
                    }
                }
            }
            Err(e) => {
                let _ = writeln!(out, "  not a valid SA MAD: {e}");
            }
        }
        return out;
    }
    match Smp::parse(m.bytes) {
        Ok(s) => {
            section(
                &mut out,
                if s.is_directed() {
                    "SMP (directed route)"
                } else {
                    "SMP (LID routed)"
                },
                &SmpHeaderFields(s),
            );
            match s.attribute() {
                Ok(attr) => {
                    let (modifier, value) = attr.parts();
                    let mut title = String::from(attr.name());
                    let mut mods = Vec::new();
                    modifier.visit(&mut |n, v| mods.push(format!("{n} {v:?}")));
                    if !mods.is_empty() {
                        let _ = write!(title, " [{}]", mods.join(", "));
                    }
                    section(&mut out, &title, value);
                    if let mad_core::AnyAttribute::Notice(_, n) = &attr {
                        if let Ok(d) = n.details() {
                            section(
                                &mut out,
                                &format!("Trap {} details", d.trap_number()),
                                d.fields(),
                            );
                        }
                    }
                    if let Err(e) = check(s, &attr) {
                        let _ = writeln!(out, "  invalid: {e}");
                    }
                }
                Err(e) => {
                    let _ = writeln!(
                        out,
                        "  attribute {:#06x}: error: {e}",
                        u16::from(s.attribute_id())
                    );
                }
            }
        }
        Err(e) => {
            let _ = writeln!(out, "  not a valid SMP: {e}");
        }
    }
    out
}

fn section(out: &mut String, title: &str, f: &dyn Fields) {
    let _ = writeln!(out, "  {title}:");
    f.visit(&mut |n, v| {
        let dots = 38usize.saturating_sub(n.len());
        let _ = writeln!(out, "    {n} {} {v:?}", ".".repeat(dots.max(2)));
    });
}

/// Field values are checked only where they carry meaning: a Get request's
/// data area is not looked at by the agent.
fn check(s: &Smp, attr: &mad_core::AnyAttribute) -> Result<(), mad_core::Error> {
    if s.method() == mad_core::Method::Get {
        Ok(())
    } else {
        attr.check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mad_core::perf::{self, PortCounters};

    fn perf_mad(attr: u16, data: &[u8]) -> [u8; MAD_SIZE] {
        let mut m = [0u8; MAD_SIZE];
        m[..4].copy_from_slice(&[1, perf::PERF_CLASS, 1, 0x81]);
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m[perf::DATA_OFFSET..perf::DATA_OFFSET + data.len()].copy_from_slice(data);
        m
    }

    #[test]
    fn perfmgt_mads_are_dissected() {
        let c = PortCounters {
            port_select: 3,
            link_downed: 2,
            xmit_pkts: 70_000,
            ..PortCounters::default()
        };
        let bytes = perf_mad(perf::ATTR_PORT_COUNTERS, &c.to_bytes().unwrap());
        let m = Mad {
            bytes: &bytes,
            origin: "line 1".into(),
        };
        let j = mad_json(&m);
        assert_eq!(j["mad"]["mgmt_class"], 4);
        assert_eq!(j["attribute"]["name"], "PortCounters");
        assert_eq!(j["attribute"]["port_select"], 3);
        assert_eq!(j["attribute"]["link_downed"], 2);
        assert_eq!(j["attribute"]["xmit_pkts"], 70_000);
        assert!(j.get("smp").is_none());
        let t = mad_text(&m, 1);
        assert!(t.contains("PortCounters:"), "{t}");
        assert!(t.contains(" 70000\n"), "{t}");
        let d = perf::PortXmitDiscardDetails {
            inactive_discards: 3,
            ..Default::default()
        };
        let bytes = perf_mad(perf::ATTR_PORT_XMIT_DISCARD_DETAILS, &d.to_bytes().unwrap());
        let j = mad_json(&Mad {
            bytes: &bytes,
            origin: "line 2".into(),
        });
        assert_eq!(j["attribute"]["name"], "PortXmitDiscardDetails");
        assert_eq!(j["attribute"]["inactive_discards"], 3);
        let r = perf::PortSamplesResult {
            tag: 0x77,
            counter14: 9,
            ..Default::default()
        };
        let bytes = perf_mad(perf::ATTR_PORT_SAMPLES_RESULT, &r.to_bytes().unwrap());
        let j = mad_json(&Mad {
            bytes: &bytes,
            origin: "line 2".into(),
        });
        assert_eq!(j["attribute"]["name"], "PortSamplesResult");
        assert_eq!(
            (&j["attribute"]["tag"], &j["attribute"]["counter14"]),
            (&0x77.into(), &9.into())
        );
        // The control and the extended result, by their names.
        let control = perf::PortSamplesControl {
            port_select: 2,
            ..Default::default()
        };
        let extended = perf::PortSamplesResultExtended {
            counter0: 1 << 40,
            ..Default::default()
        };
        for (id, name, data, field, value) in [
            (
                perf::ATTR_PORT_SAMPLES_CONTROL,
                "PortSamplesControl",
                control.to_bytes().unwrap().to_vec(),
                "port_select",
                2u64,
            ),
            (
                perf::ATTR_PORT_SAMPLES_RESULT_EXTENDED,
                "PortSamplesResultExtended",
                extended.to_bytes().unwrap().to_vec(),
                "counter0",
                1 << 40,
            ),
        ] {
            let j = mad_json(&Mad {
                bytes: &perf_mad(id, &data),
                origin: "line 3".into(),
            });
            assert_eq!(j["attribute"]["name"], name);
            assert_eq!(j["attribute"][field], value, "{name}");
        }
        // An attribute mad-core does not declare: said, not guessed.
        let bytes = perf_mad(0x0017, &[]);
        let m = Mad {
            bytes: &bytes,
            origin: "line 2".into(),
        };
        assert_eq!(
            mad_json(&m)["error"],
            "PerfMgt attribute 0x0017 is not decoded"
        );
        assert!(mad_text(&m, 2).contains("PerfMgt attribute 0x0017 is not decoded"));
    }
}
