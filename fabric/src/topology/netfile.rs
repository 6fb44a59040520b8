//! The ibnetdiscover / ibsim topology text format: a header line per node
//! (`Switch 36 "name"`, `Ca 1 "name"`, optionally preceded by
//! `switchguid=`/`caguid=` lines) followed by one line per cabled port
//! (`[1] "peer"[3]`). ibkit writes it and reads it back, and reads files
//! ibnetdiscover wrote (`(guid)` annotations and `#` comments are ignored).

use super::{LinkRate, Topology, TopologyError};
use mad_core::attr::NodeType;
use std::collections::HashMap;
use std::fmt::Write;

/// Writes `t` in ibnetdiscover format.
pub fn to_ibnetdiscover(t: &Topology) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Topology written by ibkit: {} switches, {} CAs, {} cables",
        t.switches(),
        t.cas(),
        t.links()
    );
    for (i, n) in t.nodes.iter().enumerate() {
        let _ = writeln!(s);
        let _ = writeln!(s, "vendid=0x2c9");
        let _ = writeln!(s, "sysimgguid={:#018x}", n.system_image_guid());
        match n.kind {
            NodeType::Switch => {
                let _ = writeln!(s, "switchguid={:#018x}({:x})", n.guid, n.guid);
                let _ = writeln!(
                    s,
                    "Switch\t{} \"{}\"\t\t# \"{}\" {} port 0 lid 0 lmc 0",
                    n.ports,
                    n.name,
                    n.name,
                    if n.enhanced_port0 { "enhanced" } else { "base" }
                );
            }
            _ => {
                let _ = writeln!(s, "caguid={:#018x}", n.guid);
                let _ = writeln!(s, "Ca\t{} \"{}\"\t\t# \"{}\"", n.ports, n.name, n.name);
            }
        }
        for p in 1..=n.ports {
            if let Some((m, q)) = t.peer_of(i, p) {
                let peer = &t.nodes[m];
                if n.kind == NodeType::Switch {
                    let _ = writeln!(
                        s,
                        "[{p}]\t\"{}\"[{q}]\t\t# \"{}\" lid 0 {}",
                        peer.name,
                        peer.name,
                        t.rate_of(i, p)
                    );
                } else {
                    let _ = writeln!(
                        s,
                        "[{p}]({:x})\t\"{}\"[{q}]\t\t# lid 0 lmc 0 \"{}\" lid 0 {}",
                        n.guid + u64::from(p),
                        peer.name,
                        peer.name,
                        t.rate_of(i, p)
                    );
                }
            }
        }
    }
    s
}

fn quoted(s: &str, line: usize) -> Result<(&str, &str), TopologyError> {
    let err = |what: &str| TopologyError::Parse {
        line,
        what: what.to_string(),
    };
    let a = s.find('"').ok_or_else(|| err("expected a quoted name"))?;
    let b = s[a + 1..]
        .find('"')
        .ok_or_else(|| err("unterminated quoted name"))?
        + a
        + 1;
    Ok((&s[a + 1..b], &s[b + 1..]))
}

/// The longest line read: a node or port line of ibnetdiscover is under
/// 200 bytes.
pub const MAX_LINE: usize = 4096;

/// The longest node name read: ibnetdiscover's are under 30 bytes, and a
/// name appears twice on a line ibkit writes, which must stay under
/// [`MAX_LINE`] to be read back.
pub const MAX_NAME: usize = 1024;

/// Text from the file as an error shows it: control characters escaped,
/// cut after 80 characters.
fn shown(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(80)
        .collect::<String>()
        .escape_debug()
        .to_string();
    if s.chars().nth(80).is_some() {
        out.push('…');
    }
    out
}

/// The line without its comment: from the first `#` outside quotes.
fn uncommented(raw: &str) -> &str {
    let mut quoted = false;
    for (i, c) in raw.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return &raw[..i],
            _ => {}
        }
    }
    raw
}

fn hex_guid(v: &str) -> Option<u64> {
    let v = v.split('(').next()?.trim();
    u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()
}

/// Reads the ibnetdiscover / ibsim format.
pub fn parse(text: &str) -> Result<Topology, TopologyError> {
    let mut t = Topology::default();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut pending_guid: Option<u64> = None;
    // A `sysimgguid=` line's, for the next node (as ibsim reads it).
    let mut pending_sys: Option<u64> = None;
    let mut guids: HashMap<u64, String> = HashMap::new();
    let mut current: Option<usize> = None;
    // The ports whose own line said a rate.
    let mut said: std::collections::HashSet<(usize, u8)> = Default::default();
    // (line, node, port, peer name, peer port, rate said)
    let mut cables: Vec<(usize, usize, u8, String, u8, Option<LinkRate>)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |what: String| TopologyError::Parse { line, what };
        if raw.len() > MAX_LINE {
            return Err(err(format!("line longer than {MAX_LINE} bytes")));
        }
        let l = uncommented(raw).trim();
        if l.is_empty() {
            continue;
        }
        let node_line = l.starts_with('[')
            || ["Switch", "Ca", "Hca", "Rt"]
                .iter()
                .any(|k| l.starts_with(k));
        if let Some((k, v)) = l.split_once('=').filter(|_| !node_line) {
            let k = k.trim();
            if !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || k.is_empty() {
                return Err(err(format!("cannot understand \"{}\"", shown(l))));
            }
            if matches!(k, "switchguid" | "caguid" | "guid" | "sysimgguid") {
                let g = hex_guid(v).ok_or_else(|| err(format!("bad GUID \"{}\"", shown(v))))?;
                if g == 0 || g == u64::MAX {
                    return Err(err(format!("GUID {g:#x} is reserved (IBA 4.1.1)")));
                }
                if k == "sysimgguid" {
                    pending_sys = Some(g);
                } else {
                    pending_guid = Some(g);
                }
            }
            continue;
        }
        let kind = if l.starts_with("Switch") {
            Some(NodeType::Switch)
        } else if l.starts_with("Ca") || l.starts_with("Hca") {
            Some(NodeType::ChannelAdapter)
        } else if l.starts_with("Rt") {
            return Err(err("routers are not supported".into()));
        } else {
            None
        };
        if let Some(kind) = kind {
            let mut words = l.split_whitespace();
            words.next();
            let ports: u8 = words
                .next()
                .and_then(|w| w.parse().ok())
                .filter(|&p: &u8| (1..=254).contains(&p))
                .ok_or_else(|| err("expected a port count 1..=254 after the node type".into()))?;
            let (name, _) = quoted(l, line)?;
            if name.len() > MAX_NAME {
                return Err(err(format!("node name longer than {MAX_NAME} bytes")));
            }
            if by_name.contains_key(name) {
                return Err(err(format!("node {name:?} defined twice")));
            }
            let guid = pending_guid
                .take()
                .unwrap_or(0x0002_c905_0000_0000 | ((t.nodes.len() as u64) << 8));
            if let Some(other) = guids.insert(guid, name.to_string()) {
                return Err(err(format!(
                    "node {name:?} has GUID {guid:#018x}, as {other:?} has: GUIDs are unique"
                )));
            }
            let n = t.add_node(kind, ports, guid, name.to_string(), None);
            t.nodes[n].sys_guid = pending_sys.take().filter(|&g| g != guid);
            // ibsim and ibnetdiscover say so in the comment, after the
            // quoted description.
            let comment = &raw[uncommented(raw).len()..];
            let after_desc = comment.rsplit('"').next().unwrap_or(comment);
            t.nodes[n].enhanced_port0 =
                kind == NodeType::Switch && after_desc.contains("enhanced port 0");
            by_name.insert(name.to_string(), n);
            current = Some(n);
            continue;
        }
        if let Some(rest) = l.strip_prefix('[') {
            let node = current.ok_or_else(|| err("a port line before any node".into()))?;
            let close = rest
                .find(']')
                .ok_or_else(|| err("expected ] after the port number".into()))?;
            let port: u8 = rest[..close]
                .trim()
                .parse()
                .map_err(|_| err(format!("bad port number {:?}", &rest[..close])))?;
            let (peer, after) = quoted(&rest[close + 1..], line)?;
            let after = after.trim_start();
            let pp = after
                .strip_prefix('[')
                .and_then(|a| a.split(']').next())
                .and_then(|n| n.trim().parse::<u8>().ok())
                .ok_or_else(|| err(format!("expected [port] after {peer:?}")))?;
            let comment = &raw[uncommented(raw).len()..];
            let rate = said_rate(comment).map_err(err)?;
            cables.push((line, node, port, peer.to_string(), pp, rate));
            continue;
        }
        return Err(err(format!("cannot understand \"{}\"", shown(l))));
    }
    for (line, node, port, peer, pp, rate) in cables {
        let &m = by_name.get(&peer).ok_or_else(|| TopologyError::Parse {
            line,
            what: format!("unknown node {peer:?}"),
        })?;
        match t.peer_of(node, port) {
            Some(existing) if existing == (m, pp) => {} // the other end already described it
            Some(_) => {
                return Err(TopologyError::Parse {
                    line,
                    what: format!("port {port} cabled twice"),
                })
            }
            None => t
                .connect((node, port), (m, pp))
                .map_err(|e| TopologyError::Parse {
                    line,
                    what: e.to_string(),
                })?,
        }
        // Said at both ends, the link trains to the lesser lanes and
        // speed; said at one, that one.
        if let Some(r) = rate {
            let r = if said.contains(&(m, pp)) {
                let o = t.rate_of(node, port);
                LinkRate {
                    width: r.width.min(o.width),
                    speed: r.speed.min(o.speed),
                }
            } else {
                r
            };
            said.insert((node, port));
            t.set_rate((node, port), r)
                .map_err(|e| TopologyError::Parse {
                    line,
                    what: e.to_string(),
                })?;
        }
    }
    Ok(t)
}

/// The rate a port line's comment says, as ibnetdiscover and ibsim write
/// it: `lid N 4xEDR` after the last quoted name (ibsim reads the same
/// place); `None` where the comment says none.
fn said_rate(comment: &str) -> Result<Option<LinkRate>, String> {
    let tail = comment.rsplit('"').next().unwrap_or(comment);
    let Some(at) = tail.find("lid") else {
        return Ok(None);
    };
    let mut words = tail[at..].split_whitespace().skip(1);
    let (Some(lid), Some(rate)) = (words.next(), words.next()) else {
        return Ok(None);
    };
    if lid.parse::<u16>().is_err() {
        return Ok(None);
    }
    LinkRate::parse(rate).map(Some)
}
