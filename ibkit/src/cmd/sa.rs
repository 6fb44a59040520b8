//! `ibkit sa`: a host's client of the Subnet Administrator, in the manner
//! of infiniband-diags' `saquery`, but gathering long answers through RMPP
//! itself (over libumad2sim too, which has none): ClassPortInfo, and the
//! records of nodes, ports, links, switches, forwarding tables, P_Key
//! tables, SMs, paths, services, multicast members and subscriptions,
//! filtered by any of their components, as
//! `saquery`-like dumps or JSON. `ibkit sa service --register` and
//! `--delete` send a ServiceRecord Set or Delete; `ibkit sa guidinfo
//! --set` and `--delete` ask for alias GUIDs or give them back.

use fabric::mads::dissect::fields_json;
use mad_core::field::{FieldDesc, Fields, Value};
use mad_core::mad::Method;
use mad_core::sa::{
    AnyRecord, ClassPortInfo, GuidInfoRecord, InformInfo, InformInfoRecord,
    LinearForwardingTableRecord, LinkRecord, McMemberRecord, MulticastForwardingTableRecord,
    NodeRecord, PKeyTableRecord, PathRecord, PortInfoRecord, SaAttributeId, SaRecord, SaStatus,
    ServiceRecord, SlToVlMappingTableRecord, SmInfoRecord, SwitchInfoRecord,
    VlArbitrationTableRecord, SA_DATA_SIZE,
};
use serde_json::json;
use smd::client::{QueryOpts, SaAnswer, SaClient};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Options of `ibkit sa`.
#[derive(Clone, Debug, clap::Args)]
pub struct SaArgs {
    /// What to ask for.
    #[command(subcommand)]
    pub what: SaWhat,
    /// How to reach the fabric: `umad` (a umad port: an HCA, or ibsim
    /// through libumad2sim), `ibsim` (an ibsim-protocol simulator's socket
    /// directly: Debian's ibsim or `ibkit fabric serve`), or `auto`: ibsim
    /// when IBSIM_SOCKNAME is set, else umad. libumad2sim damages the last
    /// 32 bytes of every MAD it delivers, which spoils long answers.
    #[arg(long, global = true, default_value = "auto", value_parser = ["auto", "umad", "ibsim"])]
    pub transport: String,
    /// With the ibsim transport: the node to attach at (default: SIM_HOST, else the simulator's first CA).
    #[arg(long, global = true)]
    pub sim_host: Option<String>,
    /// CA name (default: the first).
    #[arg(long, global = true)]
    pub ca: Option<String>,
    /// Port number (0: the first active).
    #[arg(long, global = true, default_value_t = 0)]
    pub port: u8,
    /// One JSON object: the attribute, the status, whether the answer is
    /// whole, and the records.
    #[arg(long, global = true)]
    pub json: bool,
    /// Milliseconds to wait for the answer, or its next segment, before
    /// asking again.
    #[arg(long, global = true, default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub timeout_ms: u64,
    /// Times the query is sent before giving up.
    #[arg(long, global = true, default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=20))]
    pub attempts: u32,
    /// SM_Key to present (hex or decimal; 0: an untrusted requester).
    #[arg(long, global = true, default_value = "0", value_parser = parse_u64)]
    pub sm_key: u64,
    /// Ask the SA at this LID rather than at the port's SM LID (a
    /// standby's, say, which answers nothing).
    #[arg(long, global = true, value_parser = clap::value_parser!(u16).range(1..=0xBFFF))]
    pub sm_lid: Option<u16>,
}

/// The records `ibkit sa` asks for. Each takes filters `component=value`
/// (the record's component names, as `--help` of each lists; numbers in
/// decimal or 0x hex, GIDs as IPv6 text, names as text), or a bare value
/// for the record's key.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum SaWhat {
    /// The SA's ClassPortInfo.
    #[command(alias = "cpi")]
    Classportinfo,
    /// NodeRecords (bare value: the LID).
    Node {
        /// Filters: component=value, or a LID.
        filters: Vec<String>,
    },
    /// PortInfoRecords (bare values: the end port's LID, then the port).
    /// A capability_mask= or capability_mask2= filter finds the ports
    /// that have those bits (the SA matches them bitwise, as for `saquery
    /// -s`): capability_mask=2 lists the ports of SMs.
    Port {
        /// Filters: component=value, or a LID and a port.
        filters: Vec<String>,
    },
    /// LinkRecords (bare value: the LID the link leaves from).
    Link {
        /// Filters: component=value, or a from-LID.
        filters: Vec<String>,
    },
    /// SwitchInfoRecords (bare value: the switch's LID).
    Switch {
        /// Filters: component=value, or a LID.
        filters: Vec<String>,
    },
    /// SLtoVLMappingTableRecords (bare values: the LID, then a switch's
    /// input and output ports). A table the SM never wrote is read from
    /// the port when the question names its LID.
    #[command(alias = "slvl")]
    Sl2vl {
        /// Filters: component=value, or a LID, an input and an output port.
        filters: Vec<String>,
    },
    /// VLArbitrationTableRecords (bare values: the LID, then the port and
    /// the block, 1–4). A block the SM never wrote is read from the port
    /// when the question names its LID.
    Vlarb {
        /// Filters: component=value, or a LID, a port and a block.
        filters: Vec<String>,
    },
    /// P_KeyTableRecords, for a trusted requester only (--sm-key): each
    /// port's partition table, 32 P_Keys a block (bare values: the LID,
    /// then a switch's port and the block).
    #[command(alias = "pkeys")]
    Pkey {
        /// Filters: component=value, or a LID, a port and a block.
        filters: Vec<String>,
    },
    /// LinearForwardingTableRecords: each switch's unicast table, 64 LIDs
    /// a block (bare values: the switch's LID, then the block).
    Lft {
        /// Filters: component=value, or a LID and a block.
        filters: Vec<String>,
    },
    /// MulticastForwardingTableRecords: each switch's multicast table, 32
    /// MLIDs by 16 ports a block (bare values: the switch's LID, then the
    /// position and the block).
    Mft {
        /// Filters: component=value, or a LID, a position and a block.
        filters: Vec<String>,
    },
    /// SMInfoRecords: the subnet's SMs, master and standbys (bare value:
    /// the SM port's LID).
    Sminfo {
        /// Filters: component=value, or a LID.
        filters: Vec<String>,
    },
    /// PathRecords (bare values: source then destination, each a LID, a
    /// GID or a node's name, its NodeDescription, as saquery
    /// --src-to-dst takes it).
    Path {
        /// Filters: component=value, or a source and a destination.
        filters: Vec<String>,
    },
    /// The paths between every source and destination GID
    /// (SubnAdmGetMulti(MultiPathRecord)); more than 11 GIDs go in RMPP
    /// segments.
    Multipath {
        /// Source GIDs (comma-separated or repeated).
        #[arg(long, value_delimiter = ',', required = true)]
        sgid: Vec<String>,
        /// Destination GIDs (comma-separated or repeated).
        #[arg(long, value_delimiter = ',', required = true)]
        dgid: Vec<String>,
        /// The most paths to return (NumbPath, 1–127; all when not given).
        #[arg(long, value_parser = clap::value_parser!(u8).range(1..=127))]
        numb_path: Option<u8>,
    },
    /// ServiceRecords (bare value: the service name); with --register or
    /// --delete, a Set or a Delete of the record the filters describe.
    Service {
        /// Filters: component=value, or a service name.
        filters: Vec<String>,
        /// Register the service (SubnAdmSet): this port's GID, P_Key
        /// 0xffff and an indefinite lease unless given.
        #[arg(long, conflicts_with = "delete")]
        register: bool,
        /// Delete the registration (SubnAdmDelete).
        #[arg(long)]
        delete: bool,
    },
    /// MCMemberRecords (bare value: the MGID); with --join or --leave, a
    /// Set or a Delete of this port's membership of the group.
    Mcmember {
        /// Filters: component=value, or an MGID.
        filters: Vec<String>,
        /// Join the group (SubnAdmSet): this port's GID and full
        /// membership unless given. A group that does not exist is
        /// created, which needs qkey=, pkey=, sl=, flow_label= and
        /// tclass= as well (mgid=:: asks the SA to make the MGID).
        #[arg(long, conflicts_with = "leave")]
        join: bool,
        /// Leave the group (SubnAdmDelete) with the join_state given
        /// (full membership unless given).
        #[arg(long)]
        leave: bool,
    },
    /// GUIDInfoRecords: each end port's GUID table, entry 0 its port GUID
    /// and then its alias GUIDs (bare values: the LID, then the block);
    /// with --set or --delete, a Set or a Delete of the entries named
    /// (guid1=0x… or guid1=0, which asks the SA to choose one) in this
    /// port's block 0 unless lid= and block_num= say otherwise.
    #[command(alias = "guids")]
    Guidinfo {
        /// Filters: component=value, or a LID and a block.
        filters: Vec<String>,
        /// Set the entries named (SubnAdmSet).
        #[arg(long, conflicts_with = "delete")]
        set: bool,
        /// Delete the entries named (SubnAdmDelete).
        #[arg(long)]
        delete: bool,
    },
    /// InformInfoRecords: the subscriptions to reports (bare value: the subscriber's GID).
    Inform {
        /// Filters: component=value, or a subscriber GID.
        filters: Vec<String>,
        /// Subscribe (SubnAdmSet(InformInfo)) to the generic trap
        /// `--trap` from every LID, print each Report as it comes (and
        /// answer it), then unsubscribe.
        #[arg(long, conflicts_with = "filters")]
        subscribe: bool,
        /// With --subscribe: the trap number (0xffff: every trap).
        #[arg(long, default_value = "0xffff", value_parser = parse_u16, requires = "subscribe")]
        trap: u16,
        /// With --subscribe: seconds to listen for Reports.
        #[arg(long, default_value_t = 10, requires = "subscribe",
              value_parser = clap::value_parser!(u64).range(1..=86_400))]
        listen: u64,
        /// With --subscribe: stop after this many Reports; fewer by the
        /// end of --listen is a failed check (exit 1).
        #[arg(long, requires = "subscribe",
              value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        count: Option<u64>,
    },
}

fn parse_u16(s: &str) -> Result<u16, String> {
    let v = parse_u64(s)?;
    u16::try_from(v).map_err(|_| format!("{s} does not fit 16 bits"))
}

use super::args::parse_u64;

/// A query: the attribute, its record size and components, the method,
/// the template and its mask.
struct Query {
    attr: SaAttributeId,
    name: &'static str,
    size: usize,
    components: &'static [FieldDesc],
    method: Method,
    record: [u8; SA_DATA_SIZE],
    mask: u64,
}

impl Query {
    fn of<R: SaRecord>(method: Method) -> Query {
        Query {
            attr: R::ID,
            name: R::ID.name().unwrap_or("record"),
            size: R::SIZE,
            components: R::COMPONENTS,
            method,
            record: [0; SA_DATA_SIZE],
            mask: 0,
        }
    }

    /// Sets component `name` to `value` and selects it in the mask.
    /// Sets each component of `defaults` the filters left out.
    fn default_to(&mut self, defaults: &[(&str, String)]) -> Result<(), String> {
        for (n, v) in defaults {
            let given = self
                .components
                .iter()
                .position(|c| c.name == *n)
                .is_some_and(|i| i < 64 && self.mask & (1 << i) != 0);
            if !given {
                self.set(n, v)?;
            }
        }
        Ok(())
    }

    fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let (i, c) = self
            .components
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == name && c.name != "reserved")
            .ok_or_else(|| {
                let names: Vec<&str> = self
                    .components
                    .iter()
                    .map(|c| c.name)
                    .filter(|n| *n != "reserved")
                    .collect();
                format!(
                    "{} has no component {name:?}; it has: {}",
                    self.name,
                    names.join(", ")
                )
            })?;
        let bad = |why: String| format!("{name}={value}: {why}");
        if c.offset % 8 == 0 && c.width == 128 && value.contains(':') {
            let g: std::net::Ipv6Addr =
                value.parse().map_err(|e| bad(format!("not a GID ({e})")))?;
            let at = c.offset / 8;
            self.record[at..at + 16].copy_from_slice(&g.octets());
        } else if c.offset % 8 == 0 && c.width == 128 && value.starts_with("0x") {
            // A GID as `--json` prints it: one 128-bit hex number.
            let g = u128::from_str_radix(&value[2..], 16)
                .map_err(|e| bad(format!("not a GID ({e})")))?;
            let at = c.offset / 8;
            self.record[at..at + 16].copy_from_slice(&g.to_be_bytes());
        } else if c.width > 64 {
            if c.offset % 8 != 0 {
                return Err(bad("cannot be given".into()));
            }
            let bytes = value.as_bytes();
            let room = c.width / 8;
            if bytes.len() > room {
                return Err(bad(format!("longer than its {room} bytes")));
            }
            let at = c.offset / 8;
            self.record[at..at + room].fill(0);
            self.record[at..at + bytes.len()].copy_from_slice(bytes);
        } else {
            let v = parse_u64(value).map_err(bad)?;
            if c.width < 64 && v >> c.width != 0 {
                return Err(bad(format!("does not fit in {} bits", c.width)));
            }
            mad_core::field::set_bits(&mut self.record, c.offset, c.width, v);
        }
        self.mask |= 1 << i;
        Ok(())
    }

    /// Applies the filters: `component=value`, or bare values given to
    /// `key` in turn with their position.
    fn filters(
        &mut self,
        filters: &[String],
        key: &dyn Fn(usize, &str) -> Result<&'static str, String>,
    ) -> Result<(), String> {
        let mut bare = 0;
        for f in filters {
            match f.split_once('=') {
                Some((n, v)) => self.set(n.trim(), v.trim())?,
                None => {
                    let n = key(bare, f)?;
                    bare += 1;
                    self.set(n, f)?;
                }
            }
        }
        Ok(())
    }
}

/// A key for the first bare value only.
fn first(name: &'static str) -> impl Fn(usize, &str) -> Result<&'static str, String> {
    move |i, v| {
        if i == 0 {
            Ok(name)
        } else {
            Err(format!(
                "{v:?}: one bare value at most ({name}); give others as component=value"
            ))
        }
    }
}

/// A key for each of the first bare values, in turn: `names`, which
/// `what` says in words.
fn keys(
    names: &'static [&'static str],
    what: &'static str,
) -> impl Fn(usize, &str) -> Result<&'static str, String> {
    move |i, v| {
        names.get(i).copied().ok_or_else(|| {
            let n = ["no", "one", "two", "three", "four"]
                .get(names.len())
                .copied()
                .unwrap_or("more");
            format!("{v:?}: {n} bare values at most ({what})")
        })
    }
}

/// The query `what` asks for.
fn query(what: &SaWhat) -> Result<Query, String> {
    let mut q = match what {
        SaWhat::Classportinfo => return Ok(Query::of::<ClassPortInfo>(Method::Get)),
        SaWhat::Node { filters } => {
            let mut q = Query::of::<NodeRecord>(Method::GetTable);
            q.filters(filters, &first("lid"))?;
            q
        }
        SaWhat::Port { filters } => {
            let mut q = Query::of::<PortInfoRecord>(Method::GetTable);
            q.filters(filters, &keys(&["endport_lid", "port_num"], "LID, port"))?;
            q
        }
        SaWhat::Link { filters } => {
            let mut q = Query::of::<LinkRecord>(Method::GetTable);
            q.filters(filters, &first("from_lid"))?;
            q
        }
        SaWhat::Switch { filters } => {
            let mut q = Query::of::<SwitchInfoRecord>(Method::GetTable);
            q.filters(filters, &first("lid"))?;
            q
        }
        SaWhat::Sl2vl { filters } => {
            let mut q = Query::of::<SlToVlMappingTableRecord>(Method::GetTable);
            q.filters(
                filters,
                &keys(
                    &["lid", "input_port_num", "output_port_num"],
                    "LID, input port, output port",
                ),
            )?;
            q
        }
        SaWhat::Vlarb { filters } => {
            let mut q = Query::of::<VlArbitrationTableRecord>(Method::GetTable);
            q.filters(
                filters,
                &keys(&["lid", "output_port_num", "block_num"], "LID, port, block"),
            )?;
            q
        }
        SaWhat::Pkey { filters } => {
            let mut q = Query::of::<PKeyTableRecord>(Method::GetTable);
            q.filters(
                filters,
                &keys(&["lid", "port_num", "block_num"], "LID, port, block"),
            )?;
            q
        }
        SaWhat::Lft { filters } => {
            let mut q = Query::of::<LinearForwardingTableRecord>(Method::GetTable);
            q.filters(filters, &keys(&["lid", "block_num"], "LID, block"))?;
            q
        }
        SaWhat::Mft { filters } => {
            let mut q = Query::of::<MulticastForwardingTableRecord>(Method::GetTable);
            q.filters(
                filters,
                &keys(&["lid", "position", "block_num"], "LID, position, block"),
            )?;
            q
        }
        SaWhat::Sminfo { filters } => {
            let mut q = Query::of::<SmInfoRecord>(Method::GetTable);
            q.filters(filters, &first("lid"))?;
            q
        }
        SaWhat::Path { filters } => {
            let mut q = Query::of::<PathRecord>(Method::GetTable);
            q.filters(filters, &|i, v| {
                let gid = v.contains(':');
                match (i, gid) {
                    (0, false) => Ok("slid"),
                    (0, true) => Ok("sgid"),
                    (1, false) => Ok("dlid"),
                    (1, true) => Ok("dgid"),
                    _ => Err(format!(
                        "{v:?}: two bare values at most (source, destination)"
                    )),
                }
            })?;
            q
        }
        SaWhat::Service {
            filters,
            register,
            delete,
        } => {
            let method = change(
                *register,
                *delete,
                filters,
                "--register and --delete need the record: service_id=…, service_name=…",
            )?;
            let mut q = Query::of::<ServiceRecord>(method);
            q.filters(filters, &first("service_name"))?;
            q
        }
        SaWhat::Mcmember {
            filters,
            join,
            leave,
        } => {
            let method = change(
                *join,
                *leave,
                filters,
                "--join and --leave need the group: mgid=… (or a bare MGID)",
            )?;
            let mut q = Query::of::<McMemberRecord>(method);
            q.filters(filters, &first("mgid"))?;
            q
        }
        SaWhat::Guidinfo {
            filters,
            set,
            delete,
        } => {
            let method = change(
                *set,
                *delete,
                filters,
                "--set and --delete need the entries: guid1=0x… (0: the SA chooses), …",
            )?;
            let mut q = Query::of::<GuidInfoRecord>(method);
            q.filters(filters, &keys(&["lid", "block_num"], "LID, block"))?;
            q
        }
        SaWhat::Multipath { .. } => {
            return Err("multipath is asked with multipath_request".into());
        }
        SaWhat::Inform { filters, .. } => {
            let mut q = Query::of::<InformInfoRecord>(Method::GetTable);
            q.filters(filters, &first("subscriber_gid"))?;
            q
        }
    };
    q.record[q.size..].fill(0);
    Ok(q)
}

/// The method of a command that may set (`set`) or delete (`delete`) the
/// record its filters describe, or else ask for a table; a Set or Delete
/// with no filter is refused with `why`.
fn change(set: bool, delete: bool, filters: &[String], why: &str) -> Result<Method, String> {
    if (set || delete) && filters.is_empty() {
        return Err(why.into());
    }
    Ok(match (set, delete) {
        (true, _) => Method::Set,
        (_, true) => Method::Delete,
        _ => Method::GetTable,
    })
}

/// What a join or a leave leaves out: this port's GID, full membership.
fn member_defaults(q: &mut Query, guid: u64) -> Result<(), String> {
    q.default_to(&[("port_gid", port_gid(guid)), ("join_state", "1".into())])
}

/// This port's GID under the default prefix, as IPv6 text.
fn port_gid(guid: u64) -> String {
    let mut gid = [0u8; 16];
    gid[..2].copy_from_slice(&[0xfe, 0x80]);
    gid[8..].copy_from_slice(&guid.to_be_bytes());
    std::net::Ipv6Addr::from(gid).to_string()
}

/// What a registration (or a deletion) leaves out: this port's GID, the
/// default partition, for ever.
fn register_defaults(q: &mut Query, guid: u64) -> Result<(), String> {
    q.default_to(&[
        ("service_gid", port_gid(guid)),
        ("service_pkey", "0xffff".into()),
        ("service_lease", "0xffffffff".into()),
    ])
}

/// The records of an answer: one for a Get, Set or Delete; for a table,
/// one every AttributeOffset words.
fn records(attr: SaAttributeId, a: &SaAnswer) -> Result<Vec<AnyRecord>, String> {
    let table = matches!(a.head.method(), Method::GetTableResp | Method::GetMultiResp);
    let step = usize::from(a.head.sa.attribute_offset) * 8;
    let chunks: Vec<&[u8]> = if !table {
        vec![&a.data[..]]
    } else if step == 0 {
        Vec::new()
    } else {
        // Whole records only: a transfer cut short ends mid-record.
        a.data.chunks_exact(step).collect()
    };
    chunks
        .into_iter()
        .map(|c| match AnyRecord::decode(attr, c) {
            Some(Ok(r)) => Ok(r),
            Some(Err(e)) => Err(format!("a record of the answer does not decode: {e}")),
            None => Err(format!("no layout for attribute {attr:?}")),
        })
        .collect()
}

/// A record dumped as saquery dumps it: `name.....value`, one a line,
/// the fields of nested attributes (a NodeRecord's NodeInfo) in line with
/// the record's own.
fn dump(out: &mut String, name: &str, f: &dyn Fields) {
    let _ = writeln!(out, "{name} dump:");
    fn fields(out: &mut String, f: &dyn Fields) {
        f.visit(&mut |n, v| {
            if let Value::Record(r) = v {
                fields(out, r);
                return;
            }
            let dots = 24usize.saturating_sub(n.len()).max(3);
            let _ = writeln!(out, "\t\t{n}{}{v:?}", ".".repeat(dots));
        });
    }
    fields(out, f);
}

/// The subscription `ibkit sa inform --subscribe` sends: generic trap
/// `trap` from any LID, any type and producer; `subscribe` 1 or 0.
fn inform_info(trap: u16, subscribe: u8) -> [u8; InformInfo::SIZE] {
    let ii = InformInfo {
        lid_range_begin: mad_core::Lid(0xFFFF),
        is_generic: 1,
        subscribe,
        notice_type: 0xFFFF,
        trap_number_or_device_id: trap,
        resp_time_value: 18,
        producer_type_or_vendor_id: 0xFF_FFFF,
        ..InformInfo::default()
    };
    ii.to_bytes().unwrap_or([0; InformInfo::SIZE])
}

/// The client `--transport` names: ibsim's protocol directly (at
/// `--sim-host`, else SIM_HOST, on a QP of its own), or a umad port. With
/// `reports` it takes the SA's Reports (on umad, through an agent
/// registered for them).
fn open(a: &SaArgs, reports: bool) -> Result<SaClient, super::Fail> {
    let mut c = open_port(a, reports)?;
    if let Some(l) = a.sm_lid {
        c.sm_lid = l;
    }
    Ok(c)
}

/// The port the client asks from (see [`open`]).
fn open_port(a: &SaArgs, reports: bool) -> Result<SaClient, super::Fail> {
    Ok(
        if let Some((sock, host)) = super::args::simulator(&a.transport, a.sim_host.as_deref()) {
            // A QP of this process's own: ibsim hands requests on QP 0 and 1
            // (Reports) to the SM's client only, and an SM under libumad2sim
            // sends a QP-1 requester the first segment of a long answer only
            // (`SaConfig::first_segment_to_qp1`).
            let qp = 0x100 + std::process::id() % 0xF000;
            SaClient::attach_sim_qp(&sock, host.as_deref(), qp)?
        } else {
            SaClient::open_with(a.ca.clone(), a.port, reports)?
        },
    )
}

/// `ibkit sa inform --subscribe`: subscribes, prints each Report (and
/// answers it) for `listen` seconds or `count` Reports, unsubscribes.
fn subscribe(a: &SaArgs, trap: u16, listen: u64, count: Option<u64>) -> super::Outcome {
    let mut c = open(a, true)?;
    let opts = QueryOpts {
        timeout_ms: a.timeout_ms,
        attempts: a.attempts,
        sm_key: a.sm_key,
        ..QueryOpts::default()
    };
    let set = |c: &mut SaClient, on: u8| -> Result<(), super::Fail> {
        let ans = c.query(
            Method::Set,
            SaAttributeId::InformInfo,
            0,
            &inform_info(trap, on),
            opts,
        )?;
        let st = ans.head.header.status();
        if st.is_ok() {
            return Ok(());
        }
        Err(super::Fail::Check(format!(
            "the SA at LID {} refused to {}subscribe: {} ({:#06x})",
            c.sm_lid,
            if on == 1 { "" } else { "un" },
            SaStatus::of(st).name().unwrap_or("MAD status"),
            st.0
        )))
    };
    set(&mut c, 1)?;
    if !a.json {
        println!(
            "subscribed to trap {} at the SA (LID {}); listening {listen} s",
            if trap == 0xFFFF {
                "any".to_string()
            } else {
                trap.to_string()
            },
            c.sm_lid
        );
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs(listen);
    let most = count.map_or(usize::MAX, |n| n as usize);
    let json = a.json;
    let got = c.reports(until, most, &mut |n, issuer| {
        let details = n.details().ok();
        if json {
            let mut o = fields_json(n);
            o.insert(
                "issuer_gid".into(),
                json!(std::net::Ipv6Addr::from(*issuer).to_string()),
            );
            if let Some(d) = &details {
                o.insert(
                    "details".into(),
                    serde_json::Value::Object(fields_json(d.fields())),
                );
            }
            println!("{}", serde_json::Value::Object(o));
        } else {
            let mut out = String::new();
            dump(&mut out, "Report: Notice", n);
            if let Some(d) = &details {
                dump(&mut out, "Notice details", d.fields());
            }
            let _ = writeln!(
                out,
                "\t\tissuer_gid..............{}",
                std::net::Ipv6Addr::from(*issuer)
            );
            print!("{out}");
        }
    })?;
    let left = set(&mut c, 0);
    if let Some(n) = count {
        super::check(got as u64 >= n, || {
            format!("{got} of {n} Report(s) arrived in {listen} s")
        })?;
    }
    left
}

/// The MultiPathRecord of `ibkit sa multipath`: its bytes (the record and
/// every GID, sources first, past one MAD when there are more than 11)
/// and its mask. At most 255 GIDs of each kind.
fn multipath_request(
    sgid: &[String],
    dgid: &[String],
    numb_path: Option<u8>,
) -> Result<(Vec<u8>, u64), String> {
    use mad_core::sa::MultiPathRecord;
    let bit = |n: &str| MultiPathRecord::component(n).unwrap_or(0);
    for (what, l) in [("--sgid", sgid), ("--dgid", dgid)] {
        if l.len() > 255 {
            return Err(format!("{what}: {} GIDs, at most 255", l.len()));
        }
    }
    let mut data = vec![0u8; 24];
    data[15] = sgid.len() as u8; // SGIDCount, bits 120..128
    data[16] = dgid.len() as u8; // DGIDCount, bits 128..136
    let mut mask = bit("sgid_count") | bit("dgid_count");
    if let Some(n) = numb_path {
        data[5] = n & 0x7F; // NumbPath, bits 41..48 (Reversible above it)
        mask |= bit("numb_path");
    }
    for g in sgid.iter().chain(dgid) {
        let a: std::net::Ipv6Addr = g
            .trim()
            .parse()
            .map_err(|e| format!("{g:?} is not a GID ({e})"))?;
        data.extend_from_slice(&a.octets());
    }
    data.resize(data.len().max(SA_DATA_SIZE), 0);
    Ok((data, mask))
}

/// Runs `ibkit sa`.
pub fn run(a: &SaArgs) -> super::Outcome {
    if let SaWhat::Multipath {
        sgid,
        dgid,
        numb_path,
    } = &a.what
    {
        let (data, mask) = multipath_request(sgid, dgid, *numb_path)?;
        let mut c = open(a, false)?;
        let opts = QueryOpts {
            timeout_ms: a.timeout_ms,
            attempts: a.attempts,
            sm_key: a.sm_key,
            ..QueryOpts::default()
        };
        let ans = c.query(
            Method::GetMulti,
            SaAttributeId::MultiPathRecord,
            mask,
            &data,
            opts,
        )?;
        return show(
            a,
            &c,
            "MultiPathRecord",
            Method::GetMulti,
            SaAttributeId::PathRecord,
            &ans,
        );
    }
    if let SaWhat::Inform {
        subscribe: true,
        trap,
        listen,
        count,
        ..
    } = a.what
    {
        return subscribe(a, trap, listen, count);
    }
    // The filters are checked before the port is opened (a node's name
    // standing in for a path's end is checked as a LID would be).
    let names = path_names(&a.what);
    let mut q = query(&with_lids(&a.what, &names, &|_| 1))?;
    for (_, name) in &names {
        Query::of::<NodeRecord>(Method::GetTable)
            .set("node_description", name)
            .map_err(|e| format!("node name {name:?}: {e}"))?;
    }
    let mut c = open(a, false)?;
    let opts = QueryOpts {
        timeout_ms: a.timeout_ms,
        attempts: a.attempts,
        sm_key: a.sm_key,
        ..QueryOpts::default()
    };
    if !names.is_empty() {
        let mut lids = BTreeMap::new();
        for (_, name) in &names {
            lids.insert(name.clone(), lid_of_name(&mut c, name, opts)?);
        }
        q = query(&with_lids(&a.what, &names, &|n| lids[n]))?;
    }
    if let SaWhat::Service {
        register, delete, ..
    } = a.what
    {
        if register || delete {
            register_defaults(&mut q, c.guid)?;
        }
    }
    if let SaWhat::Mcmember { join, leave, .. } = a.what {
        if join || leave {
            member_defaults(&mut q, c.guid)?;
        }
    }
    if let SaWhat::Guidinfo { set, delete, .. } = a.what {
        if set || delete {
            q.default_to(&[("lid", c.lid.to_string()), ("block_num", "0".into())])?;
        }
    }
    // Capability bits are asked for bitwise (IBA 1.2.1 errata: bit 31 of
    // the attribute modifier), as saquery -s asks.
    let caps = ["capability_mask", "capability_mask2"]
        .iter()
        .filter_map(|n| PortInfoRecord::component(n))
        .fold(0, |m, b| m | b);
    let opts = QueryOpts {
        attribute_modifier: if q.attr == SaAttributeId::PortInfoRecord && q.mask & caps != 0 {
            1 << 31
        } else {
            0
        },
        ..opts
    };
    let ans = c.query(q.method, q.attr, q.mask, &q.record[..q.size], opts)?;
    show(a, &c, q.name, q.method, q.attr, &ans)
}

/// The bare values of a path query that name nodes (neither a number
/// nor a GID, in IPv6 text or as `0x…`), by their place among the filters.
fn path_names(what: &SaWhat) -> Vec<(usize, String)> {
    let SaWhat::Path { filters } = what else {
        return Vec::new();
    };
    (filters.iter().enumerate())
        .filter(|(_, f)| {
            !f.contains('=') && !f.contains(':') && !f.starts_with("0x") && parse_u64(f).is_err()
        })
        .map(|(i, f)| (i, f.clone()))
        .collect()
}

/// `what` with each of `names` replaced by the LID `lid` gives it.
fn with_lids(what: &SaWhat, names: &[(usize, String)], lid: &dyn Fn(&str) -> u16) -> SaWhat {
    let SaWhat::Path { filters } = what else {
        return what.clone();
    };
    let mut filters = filters.clone();
    for (i, name) in names {
        filters[*i] = lid(name).to_string();
    }
    SaWhat::Path { filters }
}

/// The LID of the node whose NodeDescription is `name`, asked of the SA
/// (the lowest of its ports'). No such node, or two nodes of that name,
/// is a failed check.
fn lid_of_name(c: &mut SaClient, name: &str, opts: QueryOpts) -> Result<u16, super::Fail> {
    let mut q = Query::of::<NodeRecord>(Method::GetTable);
    q.set("node_description", name)
        .map_err(|e| super::Fail::Error(format!("node name {name:?}: {e}")))?;
    let ans = c.query(q.method, q.attr, q.mask, &q.record[..q.size], opts)?;
    let status = ans.head.header.status();
    let recs = if status.is_ok() {
        records(q.attr, &ans)?
    } else {
        Vec::new()
    };
    let mut found: Vec<(u64, u16)> = recs
        .iter()
        .filter_map(|r| match r {
            AnyRecord::NodeRecord(n) => Some((n.node_info.node_guid.0, n.lid.0)),
            _ => None,
        })
        .collect();
    found.sort_unstable_by_key(|&(_, lid)| lid);
    let guids: std::collections::BTreeSet<u64> = found.iter().map(|&(g, _)| g).collect();
    match (found.first(), guids.len()) {
        (Some(&(_, lid)), 1) => Ok(lid),
        (None, _) => Err(super::Fail::Check(format!(
            "no node named {name:?} at the SA (LID {})",
            c.sm_lid
        ))),
        (_, n) => Err(super::Fail::Check(format!(
            "{n} nodes are named {name:?}: give a LID or a GID"
        ))),
    }
}

/// Prints the answer `ans` to a `method` of `name`, its records decoded
/// as `attr`'s: saquery-like, or one JSON object. A refusal or a cut
/// answer is a failed check.
fn show(
    a: &SaArgs,
    c: &SaClient,
    name: &str,
    method: Method,
    attr: SaAttributeId,
    ans: &SaAnswer,
) -> super::Outcome {
    let status = ans.head.header.status();
    if !status.is_ok() {
        let sa = SaStatus::of(status);
        let why = match sa {
            SaStatus::Ok => format!(
                "{} ({:#06x})",
                status.code().name().unwrap_or("MAD status"),
                status.0
            ),
            s => format!("{} ({:#06x})", s.name().unwrap_or("SA status"), status.0),
        };
        if a.json {
            println!(
                "{}",
                json!({"attribute": name, "status": status.0, "records": []})
            );
        }
        return Err(super::Fail::Check(format!(
            "the SA at LID {} refused the {} {}: {why}",
            c.sm_lid,
            name,
            method_name(method)
        )));
    }
    let recs = records(attr, ans)?;
    if a.json {
        let list: Vec<_> = recs
            .iter()
            .map(|r| serde_json::Value::Object(fields_json(r.fields())))
            .collect();
        println!(
            "{}",
            json!({
                "attribute": name,
                "status": status.0,
                "sm_lid": c.sm_lid,
                "segments": ans.segments,
                "complete": ans.complete,
                "records": list,
            })
        );
    } else {
        let mut out = String::new();
        for r in &recs {
            dump(&mut out, r.name(), r.fields());
        }
        print!("{out}");
    }
    super::check(ans.complete, || {
        format!(
            "the answer is incomplete: {} whole record(s) in {} MAD(s) arrived and more was sent \
             (libumad2sim delivers only the first MAD of a kernel-RMPP answer, such as OpenSM's)",
            recs.len(),
            ans.segments.max(1)
        )
    })
}

fn method_name(m: Method) -> &'static str {
    match m {
        Method::Get => "Get",
        Method::Set => "Set",
        Method::Delete => "Delete",
        Method::GetTable => "GetTable",
        _ => "request",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mad_core::sa::McMemberRecord;

    #[test]
    fn a_gid_is_taken_as_ipv6_text_or_as_the_hex_json_prints() {
        let mut text = Query::of::<McMemberRecord>(Method::Set);
        text.set("mgid", "ff12:a01b:fe80::1").unwrap();
        let mut hex = Query::of::<McMemberRecord>(Method::Set);
        hex.set("mgid", "0xff12a01bfe8000000000000000000001")
            .unwrap();
        assert_eq!(text.record[..16], hex.record[..16]);
        assert_eq!((text.mask, hex.mask), (1, 1));
        assert_eq!(hex.record[..4], [0xff, 0x12, 0xa0, 0x1b]);
        assert_eq!(hex.record[15], 1);
        let mut bad = Query::of::<McMemberRecord>(Method::Set);
        let e = bad
            .set("mgid", "0x1ff12a01bfe8000000000000000000001")
            .unwrap_err();
        assert!(e.contains("not a GID"), "{e}");
        assert_eq!(bad.mask, 0);
    }
}
