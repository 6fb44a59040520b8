//! ibkit's subnet manager on a real MAD stack: the sans-IO [`smi::sm`]
//! driven over a umad port of a channel adapter (libibumad through
//! [`verbs_sys::umad`]). On real hardware that manages a real subnet;
//! under ibsim (or `ibkit fabric serve`) it manages the simulated fabric
//! through the `libumad2sim.so` preload, as OpenSM is tested.
//!
//! [`run`] is the driver loop: it hands the SM's SMPs to the kernel (the
//! directed-route agent for discovery, the LID-routed one for updates and
//! traps), feeds responses and timeouts back, and stops when the subnet is
//! up (or runs its sweeps for good). Failures are typed ([`SmdError`]); the
//! result ([`SmRun`]) derives its JSON.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub mod config;
pub mod dump;
pub mod names;
pub mod notify;
pub mod opensm_conf;
pub mod simport;
pub mod vmctl;
mod wire;

use fabric::pcap::FrameAddr;
use mad_core::attr::SmState;
use mad_core::{Method, Smp};
use sa::{Sa, SaConfig};
use serde::{Serialize, Serializer};
use smi::sm::partitions::{self, PartitionConfig};
use smi::sm::qos::{self, QosConfig};
use smi::sm::qos_policy::QosPolicy;
use smi::sm::{Engine, Handled, LidPolicy, PartEnforce, Phase, Sm, SmConfig, SmError, SmEvent};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// [`SmdConfig::max_rate_enum`] with no limit (OpenSM's 63).
pub const NO_RATE_LIMIT: u8 = sa::path::NO_RATE_LIMIT;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use verbs_sys::umad::UmadPort;
use wire::{Capture, Incoming, SimWire, UmadWire, Wire};

/// How the SM reaches its fabric.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Via {
    /// A umad port: CA name (`None`: the first) and port number (0: the
    /// first active), or the port whose GUID is `guid` (OpenSM's `-g`).
    /// Real hardware, or ibsim through libumad2sim.
    Umad {
        /// CA name.
        ca: Option<String>,
        /// Port number.
        port: u8,
        /// The port's GUID: when given, the CA and port that have it.
        guid: Option<u64>,
    },
    /// An ibsim-protocol simulator's socket, spoken to directly: socket
    /// base name, and the node to attach at as its SM (`None`: the
    /// simulator's first CA).
    Sim {
        /// The socket base name (ibsim's IBSIM_SOCKNAME).
        socket: String,
        /// The node's name or description.
        node: Option<String>,
        /// The port GUID the SM must have been attached at (the
        /// simulator attaches by node name, not by GUID).
        guid: Option<u64>,
    },
}

/// Where and how to run.
#[derive(Clone, Debug)]
pub struct SmdConfig {
    /// The way to the fabric.
    pub via: Via,
    /// Stop once the subnet is up.
    pub once: bool,
    /// Routing engine.
    pub routing: Engine,
    /// Under the file engine, the engine where the file does not fit
    /// (OpenSM's next engine in `routing_engine`; min-hop by default).
    pub file_fallback: Engine,
    /// LID policy for hypervisors' VFs.
    pub lid_policy: LidPolicy,
    /// Milliseconds an SMP's answer is waited for.
    pub timeout_ms: u64,
    /// Milliseconds an optimized Set(SLtoVLMappingTable)'s answer is
    /// waited for (OpenSM's `long_transaction_timeout`).
    pub long_timeout_ms: u64,
    /// Times an unanswered SMP is sent again.
    pub retries: u32,
    /// SMPs in flight at once (OpenSM's `max_wire_smps`); SIGHUP applies
    /// a new value.
    pub window: usize,
    /// The most SMPs in flight once the window is stuck full (OpenSM's
    /// `max_wire_smps2`; at or below `window`: never grows); SIGHUP
    /// applies a new value.
    pub window2: usize,
    /// Milliseconds a full window waits for a response before it grows by
    /// one (OpenSM's `max_smps_timeout`, in µs there).
    pub stuck_ms: u64,
    /// Milliseconds between light sweeps (without `once`).
    pub sweep_ms: u64,
    /// Every periodic sweep a heavy one (OpenSM's `force_heavy_sweep`).
    pub force_heavy_sweep: bool,
    /// How long opening the port may take: libumad2sim waits for its
    /// simulator without a word, and a wedged kernel driver may too.
    pub open_wait: Duration,
    /// Write every MAD sent and received to this pcap file.
    pub pcap: Option<PathBuf>,
    /// OpenSM's partition configuration (`partitions.conf`) to apply.
    pub partitions: Option<PathBuf>,
    /// Apply QoS (SL-to-VL and VL arbitration tables): OpenSM's defaults,
    /// or the `qos_*` options of `qos_config`.
    pub qos: bool,
    /// An `opensm.conf` whose `qos_*` options give the QoS policy (QoS on).
    pub qos_config: Option<PathBuf>,
    /// A `qos-policy.conf`: the SL and limits of PathRecords, and the SL
    /// of the multicast groups the SM makes for its partitions.
    pub qos_policy: Option<PathBuf>,
    /// Set (by a SIGHUP handler) to re-read the partition and QoS
    /// configurations and start a heavy sweep
    /// ([`smi::sm::Sm::request_heavy_sweep`]); the driver clears it. A
    /// broken file leaves what is in force.
    pub reload: Option<std::sync::Arc<AtomicBool>>,
    /// Election priority (0–15): the highest SM is master.
    pub priority: u8,
    /// SM_Key (0: none).
    pub sm_key: u64,
    /// The SA key (OpenSM's `sa_key`): a requester that presents it in an
    /// SA request is trusted; another non-zero key is dropped.
    pub sa_key: u64,
    /// The M_Key (OpenSM's `m_key`; 0: none), written with
    /// `m_key_protect_bits` and `m_key_lease_period` to every end port
    /// and put in every SMP ([`smi::sm::SmConfig::m_key`]).
    pub m_key: u64,
    /// M_KeyProtectBits, 0–3 (OpenSM's `m_key_protection_level`).
    pub m_key_protect_bits: u8,
    /// M_KeyLeasePeriod, seconds (OpenSM's `m_key_lease_period`).
    pub m_key_lease_period: u16,
    /// Send each port the M_Key it is known to hold, learned or read from
    /// `guid2mkey` in `cache_dir` (OpenSM's `m_key_lookup`;
    /// [`smi::sm::SmConfig::m_key_lookup`]).
    pub m_key_lookup: bool,
    /// A key of its own for each end port
    /// ([`smi::sm::SmConfig::m_key_per_port`]).
    pub m_key_per_port: bool,
    /// SubnetTimeOut written to every end port (OpenSM's `subnet_timeout`).
    pub subnet_timeout: u8,
    /// The link parameters written as each link comes up (OpenSM's
    /// head-of-queue lifetimes, VL stall counts, `max_op_vls`, error
    /// thresholds).
    pub link: smi::sm::LinkParams,
    /// Bits 39..32 of the alias GUIDs the SA makes (OpenSM's
    /// `sm_assigned_guid`).
    pub assigned_guid_byte: u8,
    /// Milliseconds between a standby's polls of the master.
    pub poll_ms: u64,
    /// Polls of the master a standby lets go unanswered in a row before
    /// it takes over (OpenSM's `polling_retry_number`); SIGHUP applies a
    /// new value.
    pub poll_retries: u32,
    /// Where OpenSM's dumps go (`opensm-subnet.lst`, `opensm-lfts.dump`,
    /// `opensm.fdbs`, `opensm-lid-matrix.dump`, `opensm.mcfdbs`, with QoS
    /// `opensm-sl2vl.dump`), written each time the subnet comes up or
    /// changes.
    pub dump_dir: Option<PathBuf>,
    /// Where the LID cache (`guid2lid`, OpenSM's layout) is read at start
    /// and written each time the subnet comes up or changes, so that ports
    /// keep their LIDs across a restart of the SM.
    pub cache_dir: Option<PathBuf>,
    /// An SA database in OpenSM's layout (`opensm-sa.dump`, as OpenSM's
    /// `-S`) whose groups, services and subscriptions are restored when
    /// the subnet is first up. With `dump_dir`, the SA's own is written
    /// there as it changes (at most once a second) and at the stop.
    pub sa_db_file: Option<PathBuf>,
    /// Where the SA's own `opensm-sa.dump` is written, as with
    /// `dump_dir` (which wins), without the other dumps: OpenSM's
    /// `sa_db_dump`.
    pub sa_db_dump_dir: Option<PathBuf>,
    /// Where `opensm-subnet.lst` (and with fat-tree routing
    /// `opensm-ftree-ca-order.dump`) is written as with `dump_dir`, without
    /// the other dumps: OpenSM writes it whatever its log flags.
    pub subnet_lst_dir: Option<PathBuf>,
    /// Number every port afresh when starting as master, as OpenSM's
    /// `reassign_lids` (`-r`); by default ports keep the LIDs they hold.
    pub reassign_lids: bool,
    /// LMC of every CA port, 0–7 (OpenSM's `lmc`).
    pub lmc: u8,
    /// Enhanced switch ports 0 get `2^lmc` LIDs too (OpenSM's `lmc_esp0`).
    pub lmc_esp0: bool,
    /// Up*/down* routes the roots' own LIDs by min-hop (OpenSM's
    /// `connect_roots`).
    pub connect_roots: bool,
    /// LASH's first SL and VL (OpenSM's `lash_start_vl`).
    pub lash_start_vl: u8,
    /// Never ask end ports' clients to reregister (OpenSM's
    /// `no_clients_rereg`; see [`SmConfig::no_clients_rereg`]).
    pub no_clients_rereg: bool,
    /// The subnet prefix every end port gets (OpenSM's `subnet_prefix`).
    pub subnet_prefix: u64,
    /// The switches up*/down* and fat-tree routing take as roots, a node
    /// GUID a line (OpenSM's `root_guid_file`, `-a`), read at start.
    pub root_guid_file: Option<PathBuf>,
    /// The `file` engine's tables (OpenSM's `lfts_file`, `-U`), in the
    /// layout of `opensm-lfts.dump`: read at start and on SIGHUP, and
    /// only under `--routing file`.
    pub lfts_file: Option<PathBuf>,
    /// The ports min-hop and up*/down* route first, a port GUID a line
    /// (OpenSM's `guid_routing_order_file`, `-X`): read at start and on
    /// SIGHUP.
    pub guid_routing_order_file: Option<PathBuf>,
    /// How min-hop and up*/down* pick their ports: OpenSM's
    /// `hop_weights_file` (`-w`) and `port_search_ordering_file` (`-O`),
    /// read at start and on SIGHUP, `port_shifting`, `scatter_ports`,
    /// `guid_routing_order_no_scatter` (SIGHUP applies new values).
    pub port_selection: PortSelectionFiles,
    /// The names the dumps give nodes, by node GUID (OpenSM's
    /// `node_name_map_name`, infiniband-diags' `--node-name-map`), read at
    /// start.
    pub node_name_map: Option<PathBuf>,
    /// The LID and key caches and the SA's database reach the disk each
    /// time they are written, before they replace the old ones (OpenSM's
    /// `fsync_high_avail_files`; true by default, as OpenSM's).
    pub fsync_high_avail_files: bool,
    /// Partition enforcement on the switch ports cabled to CAs (OpenSM's
    /// `part_enforce`); SIGHUP applies a new one.
    pub part_enforce: PartEnforce,
    /// A partition's `both` member holds the full and the limited P_Key
    /// (OpenSM's `allow_both_pkeys`); SIGHUP applies a new value.
    pub allow_both_pkeys: bool,
    /// A P_Key keeps its index in a port's table (OpenSM's
    /// `keep_pkey_indexes`); SIGHUP applies a new value.
    pub keep_pkey_indexes: bool,
    /// Taking the subnet over, the `guid2lid` of `cache_dir` is read
    /// again and its LIDs given as at a fresh start (OpenSM's
    /// `honor_guid2lid_file`); SIGHUP applies a new value.
    pub honor_guid2lid_file: bool,
    /// Traps start sweeps (OpenSM's `sweep_on_trap`); SIGHUP applies a
    /// new value.
    pub sweep_on_trap: bool,
    /// A port that keeps sending the same trap 129-131 is disabled
    /// (OpenSM's `babbling_port_policy`); SIGHUP applies a new value.
    pub babbling_port_policy: bool,
    /// Take no part in the election: master whatever SMs are there
    /// (OpenSM's `ignore_other_sm`).
    pub ignore_other_sm: bool,
    /// Start NOT ACTIVE: send nothing, answer SMInfo, until a master's
    /// Discover (OpenSM's `sm_inactive`, `-I`).
    pub sm_inactive: bool,
    /// No multicast forwarding: groups kept, no MFT written, and the SA's
    /// ClassPortInfo without IsUDMulticastSupported (OpenSM's
    /// `disable_multicast`).
    pub disable_multicast: bool,
    /// The SA checks a join's fields against the group's (OpenSM's
    /// `mcgroup_join_validation`).
    pub mcgroup_join_validation: bool,
    /// The SA checks the MGID a new group is asked with (OpenSM's
    /// `ipoib_mcgroup_creation_validation`).
    pub ipoib_mcgroup_creation_validation: bool,
    /// New IPv6 solicited-node groups share an MLID (OpenSM's
    /// `consolidate_ipv6_snm_req`); SIGHUP applies a new value.
    pub consolidate_ipv6_snm_req: bool,
    /// The SA's rates keep to the original extended codes, 300 Gb/s at
    /// most (OpenSM's `use_original_extended_sa_rates_only`); SIGHUP
    /// applies a new value.
    pub use_original_extended_sa_rates_only: bool,
    /// The highest rate code the SA answers (OpenSM's `max_rate_enum`,
    /// 2–24; 63, no limit, by default); SIGHUP applies a new value.
    pub max_rate_enum: u8,
    /// Switches' MulticastFDBTop written (OpenSM's `use_mfttop`).
    pub use_mfttop: bool,
    /// One Set(SLtoVL) a switch where it has optimized programming
    /// (OpenSM's `use_optimized_slvl`; true by default in ibkit).
    pub use_optimized_slvl: bool,
    /// A port that leaves loses its InformInfo subscriptions (OpenSM's
    /// `drop_event_subscriptions`); SIGHUP applies a new value.
    pub drop_event_subscriptions: bool,
    /// The configuration file to read again on SIGHUP, with what the
    /// command line set (which wins over the file).
    pub reconfig: Option<Reconfig>,
    /// A Unix socket to take VM requests on ([`vmctl`]: create, migrate,
    /// destroy, list; `ibkit vm`), mode 0600, the SM's user and root only.
    pub vm_socket: Option<PathBuf>,
    /// Under systemd, `READY=1` at the latest this long after the start,
    /// in ms ([`notify::READY_AT_THE_LATEST`] by default).
    pub ready_timeout_ms: u64,
}

/// Changes the log's level (RUST_LOG, where set, wins).
pub type SetLogLevel = std::sync::Arc<dyn Fn(&str) + Send + Sync>;

/// What SIGHUP reads again: the configuration file, under the settings
/// the command line gave.
#[derive(Clone)]
pub struct Reconfig {
    /// The TOML file (`ibkit sm --config`), or OpenSM's `opensm.conf`
    /// (`--opensm-config`).
    pub file: PathBuf,
    /// `file` is an `opensm.conf` ([`opensm_conf`]).
    pub opensm: bool,
    /// What the command line set: these win over the file.
    pub flags: config::SmFile,
    /// The log file in force (`None`: standard error).
    pub log_file: Option<PathBuf>,
    /// Applies a new log level (the log's reload handle).
    pub set_log_level: Option<SetLogLevel>,
}

impl std::fmt::Debug for Reconfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconfig")
            .field("file", &self.file)
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

impl Default for SmdConfig {
    fn default() -> SmdConfig {
        SmdConfig {
            via: Via::Umad {
                ca: None,
                port: 0,
                guid: None,
            },
            once: true,
            routing: Engine::MinHop,
            file_fallback: Engine::MinHop,
            lid_policy: LidPolicy::Prepopulated,
            timeout_ms: 200,
            long_timeout_ms: 500,
            retries: 3,
            window: SmConfig::default().window,
            window2: 0,
            stuck_ms: SmConfig::default().stuck_ms,
            sweep_ms: 10_000,
            force_heavy_sweep: false,
            open_wait: Duration::from_secs(20),
            pcap: None,
            partitions: None,
            qos: false,
            qos_config: None,
            qos_policy: None,
            reload: None,
            priority: 0,
            sm_key: 1,
            sa_key: 1,
            m_key: 0,
            m_key_protect_bits: 0,
            m_key_lease_period: 0,
            m_key_lookup: true,
            m_key_per_port: false,
            subnet_timeout: 18,
            link: smi::sm::LinkParams::default(),
            assigned_guid_byte: 0,
            poll_ms: 500,
            poll_retries: 0,
            dump_dir: None,
            sa_db_dump_dir: None,
            subnet_lst_dir: None,
            cache_dir: None,
            sa_db_file: None,
            reassign_lids: false,
            lmc: 0,
            lmc_esp0: false,
            connect_roots: false,
            lash_start_vl: 0,
            no_clients_rereg: false,
            subnet_prefix: mad_core::Gid::DEFAULT_PREFIX,
            root_guid_file: None,
            lfts_file: None,
            guid_routing_order_file: None,
            port_selection: PortSelectionFiles::default(),
            node_name_map: None,
            fsync_high_avail_files: true,
            part_enforce: PartEnforce::Both,
            allow_both_pkeys: false,
            keep_pkey_indexes: true,
            honor_guid2lid_file: false,
            sweep_on_trap: true,
            babbling_port_policy: false,
            ignore_other_sm: false,
            sm_inactive: false,
            disable_multicast: false,
            mcgroup_join_validation: true,
            ipoib_mcgroup_creation_validation: true,
            consolidate_ipv6_snm_req: false,
            use_original_extended_sa_rates_only: false,
            max_rate_enum: NO_RATE_LIMIT,
            use_mfttop: true,
            use_optimized_slvl: true,
            drop_event_subscriptions: false,
            reconfig: None,
            vm_socket: None,
            ready_timeout_ms: notify::READY_AT_THE_LATEST,
        }
    }
}

/// Names the ports whose P_Key table could not hold every P_Key the
/// partitions give them (as OpenSM's ERR 0512 does).
fn log_pkey_overflow(sm: &Sm) {
    for (n, p) in sm.subnet().pkey_overflow() {
        let guid = sm.subnet().node(n).map_or(0, |x| x.info.node_guid.0);
        tracing::error!(
            "P_Key table full on node {guid:#018x} port {p}: some partitions left out{}",
            if p != 0 && sm.subnet().node(n).is_some_and(|x| x.is_switch()) {
                ", enforcement off"
            } else {
                ""
            }
        );
    }
}

/// Reads and parses a partition configuration: its warnings logged with
/// their place, a refusal as "FILE: line L, column C: reason".
pub fn read_partitions(path: &std::path::Path) -> Result<PartitionConfig, SmdError> {
    let bad = |why: String| SmdError::Partitions(format!("{}: {why}", path.display()));
    let text = read_bounded(path).map_err(bad)?;
    let cfg = partitions::parse(&text).map_err(|e| bad(e.to_string()))?;
    log_warnings(path, &cfg.warnings);
    Ok(cfg)
}

/// The root switches' node GUIDs in `path` (OpenSM's `root_guid_file`),
/// or why not, as "FILE: line L, column C: reason".
pub fn read_root_guids(path: &std::path::Path) -> Result<Vec<u64>, SmdError> {
    let bad = |why: String| SmdError::RootGuids(format!("{}: {why}", path.display()));
    let text = read_bounded(path).map_err(bad)?;
    opensm_conf::parse_node_guids(&text).map_err(|e| bad(e.to_string()))
}

/// The port GUIDs in `path` (OpenSM's `guid_routing_order_file`, in the
/// syntax of its `root_guid_file`), or why not, as "FILE: line L, column
/// C: reason".
pub fn read_routing_order(path: &std::path::Path) -> Result<Vec<u64>, SmdError> {
    let bad = |why: String| SmdError::RoutingOrder(format!("{}: {why}", path.display()));
    let text = read_bounded(path).map_err(bad)?;
    opensm_conf::parse_node_guids(&text).map_err(|e| bad(e.to_string()))
}

/// How min-hop and up*/down* pick their ports, as the SM is told it:
/// the two files by path, the rest by value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSelectionFiles {
    /// OpenSM's `hop_weights_file`: `SWITCH_GUID PORT WEIGHT` a line.
    pub hop_weights_file: Option<PathBuf>,
    /// OpenSM's `port_search_ordering_file`: `SWITCH_GUID PORT...` a line.
    pub port_search_ordering_file: Option<PathBuf>,
    /// OpenSM's `port_shifting`.
    pub port_shifting: bool,
    /// OpenSM's `scatter_ports`: 0 off, else the seed.
    pub scatter_ports: u32,
    /// OpenSM's `guid_routing_order_no_scatter`.
    pub guid_routing_order_no_scatter: bool,
    /// OpenSM's `port_profile_switch_nodes`.
    pub port_profile_switch_nodes: bool,
    /// OpenSM's `port_prof_ignore_file`: `SWITCH_GUID PORT` a line.
    pub port_prof_ignore_file: Option<PathBuf>,
    /// Under LMC, the LIDs above a port's base routed as OpenSM's.
    pub lmc_as_opensm: bool,
}

impl PortSelectionFiles {
    /// The selection, its files read, or why not, as "OPTION: FILE:
    /// line L, column C: reason".
    pub fn read(&self) -> Result<smi::sm::PortSelection, SmdError> {
        let mut sel = smi::sm::PortSelection {
            shifting: self.port_shifting,
            scatter: self.scatter_ports,
            order_no_scatter: self.guid_routing_order_no_scatter,
            count_switch_lids: self.port_profile_switch_nodes,
            lmc_as_opensm: self.lmc_as_opensm,
            ..Default::default()
        };
        if let Some(p) = &self.port_prof_ignore_file {
            sel.prof_ignore = read_parsed(
                "port_prof_ignore_file",
                p,
                opensm_conf::parse_port_prof_ignore,
            )?;
        }
        if let Some(p) = &self.hop_weights_file {
            sel.hop_weights = read_parsed("hop_weights_file", p, opensm_conf::parse_hop_weights)?;
        }
        if let Some(p) = &self.port_search_ordering_file {
            sel.search_order = read_parsed(
                "port_search_ordering_file",
                p,
                opensm_conf::parse_port_search_order,
            )?;
        }
        Ok(sel)
    }
}

/// The file `key` names at `p`, read (bounded) and parsed, or why not.
fn read_parsed<T>(
    key: &str,
    p: &Path,
    parse: fn(&str) -> Result<T, config::ConfigError>,
) -> Result<T, SmdError> {
    let bad = |why: String| SmdError::PortSelection(format!("{key}: {}: {why}", p.display()));
    let text = read_bounded(p).map_err(bad)?;
    parse(&text).map_err(|e| bad(e.to_string()))
}

/// The longest line of an `lfts_file` read (OpenSM reads 1,023 bytes
/// of each).
pub const MAX_LFTS_LINE: usize = 4096;

/// The most routes an `lfts_file` may hold: 64 Mi, at 16 bytes each 1
/// GiB held, four times a dump of fat-tree-11664 (15.1 M routes).
pub const MAX_LFTS_ROUTES: usize = 64 << 20;

/// The most bytes of an `lfts_file` read: 8 GiB (a dump runs to about 75
/// bytes a route).
pub const MAX_LFTS_FILE_BYTES: u64 = 8 << 30;

/// The `file` engine's tables in `path` (OpenSM's `lfts_file`), or why
/// not, as "FILE: line L, column C: reason". The file is read a line at
/// a time (never held whole), at most [`MAX_LFTS_ROUTES`] routes,
/// [`MAX_LFTS_FILE_BYTES`] bytes and [`MAX_LFTS_LINE`] bytes a line.
pub fn read_lfts_file(path: &std::path::Path) -> Result<smi::sm::LftFile, SmdError> {
    read_lfts_file_within(path, MAX_LFTS_ROUTES, MAX_LFTS_FILE_BYTES)
}

/// [`read_lfts_file`] with other bounds.
pub fn read_lfts_file_within(
    path: &std::path::Path,
    max_routes: usize,
    max_bytes: u64,
) -> Result<smi::sm::LftFile, SmdError> {
    use std::io::{BufRead, Read};
    let bad = |why: String| SmdError::LftsFile(format!("{}: {why}", path.display()));
    let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut input = std::io::BufReader::with_capacity(1 << 20, f);
    let mut reader = smi::sm::LftFileReader::default();
    let (mut buf, mut bytes) = (Vec::with_capacity(256), 0u64);
    loop {
        buf.clear();
        let n = (&mut input)
            .take(MAX_LFTS_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| bad(e.to_string()))?;
        if n == 0 {
            break;
        }
        let at = reader.lines() + 1;
        bytes += n as u64;
        if bytes > max_bytes {
            return Err(bad(format!("line {at}: longer than {max_bytes} bytes")));
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        } else if buf.len() > MAX_LFTS_LINE {
            return Err(bad(format!("line {at}: longer than {MAX_LFTS_LINE} bytes")));
        }
        // A node's description may hold any bytes; what is read is ASCII.
        let text = String::from_utf8_lossy(&buf);
        reader.line(&text).map_err(|e| bad(e.to_string()))?;
        if reader.routes() > max_routes {
            return Err(bad(format!("line {at}: more than {max_routes} routes")));
        }
    }
    Ok(reader.finish())
}

/// The node name map in `path` (OpenSM's `node_name_map_name`).
pub fn read_node_name_map(path: &std::path::Path) -> Result<names::NodeNames, SmdError> {
    let bad = |why: String| SmdError::NodeNameMap(format!("{}: {why}", path.display()));
    let text = read_bounded(path).map_err(bad)?;
    names::parse_node_name_map(&text).map_err(|e| bad(e.to_string()))
}

/// A configuration file's text, at most
/// [`partitions::MAX_CONFIG_BYTES`], or why not.
fn read_bounded(path: &std::path::Path) -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    f.take(partitions::MAX_CONFIG_BYTES as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() > partitions::MAX_CONFIG_BYTES {
        return Err(format!(
            "longer than {} bytes",
            partitions::MAX_CONFIG_BYTES
        ));
    }
    Ok(text)
}

/// Logs what a configuration file's reader skipped or assumed, with its
/// place.
fn log_warnings(path: &std::path::Path, warnings: &[partitions::Warning]) {
    for w in warnings {
        tracing::warn!(
            "{}: line {}, column {}: {}",
            path.display(),
            w.line,
            w.column,
            w.what
        );
    }
}

/// Reads and parses the `qos_*` options of an `opensm.conf`: warnings
/// logged with their place, a refusal as "FILE: line L, column C: reason".
pub fn read_qos(path: &std::path::Path) -> Result<QosConfig, SmdError> {
    let bad = |why: String| SmdError::Qos(format!("{}: {why}", path.display()));
    let text = read_bounded(path).map_err(bad)?;
    let cfg = qos::parse(&text).map_err(|e| bad(e.to_string()))?;
    log_warnings(path, &cfg.warnings);
    Ok(cfg)
}

/// Reads and parses a `qos-policy.conf` (the full policy and
/// `qos-ulps`); a refusal as "FILE: line L, column C: reason". A
/// `qos-setup` section is logged as skipped, as OpenSM skips it.
pub fn read_qos_policy(path: &std::path::Path) -> Result<QosPolicy, SmdError> {
    let bad = |why: String| SmdError::Qos(format!("{}: {why}", path.display()));
    let text = read_bounded(path).map_err(bad)?;
    let p = smi::sm::qos_policy::parse_policy(&text).map_err(|e| bad(e.to_string()))?;
    if p.setup_skipped {
        tracing::warn!(
            "{}: qos-setup skipped, as OpenSM skips it: SL-to-VL and VL arbitration tables come from --qos-config",
            path.display()
        );
    }
    tracing::info!(
        "{}: QoS policy: {} port groups, {} levels, {} match rules, {} ULP rules",
        path.display(),
        p.groups.len(),
        p.levels.len(),
        p.match_rules.len(),
        p.rules.len()
    );
    Ok(p)
}

/// The QoS policy the configuration asks for, if any.
fn qos_tables(c: &SmdConfig) -> Result<Option<QosConfig>, SmdError> {
    match &c.qos_config {
        Some(p) => read_qos(p).map(Some),
        None if c.qos => Ok(Some(QosConfig::default())),
        None => Ok(None),
    }
}

/// One node as the SM left it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeRow {
    /// Node GUID (`0x…` in JSON).
    #[serde(serialize_with = "hex_guid")]
    pub guid: u64,
    /// A switch.
    pub switch: bool,
    /// The end port the row is for: a switch's 0, a CA's port (a
    /// multi-port CA has a row per cabled port).
    pub port: u8,
    /// Its LID.
    pub lid: u16,
    /// A switch's LFT up to the highest LID (empty for a CA).
    pub lft: Vec<u8>,
}

fn hex_guid<S: Serializer>(g: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{g:#018x}"))
}

/// What a run did; serializes as `ibkit sm --json` prints it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SmRun {
    /// Nodes found (a multi-port CA once, however many of its ports).
    pub nodes: usize,
    /// Switches found.
    pub switches: usize,
    /// Highest LID assigned.
    pub lids: u16,
    /// SMPs sent.
    pub smps: u64,
    /// Milliseconds to the subnet up (NaN, `null` in JSON, when it did not
    /// come up).
    pub up_ms: f64,
    /// Retransmissions.
    pub retries: u64,
    /// The subnet came up.
    pub up: bool,
    /// SA requests answered (any status).
    pub sa_answered: u64,
    /// SA MADs sent (answers, RMPP segments and aborts).
    pub sa_sent: u64,
    /// Nanoseconds spent in the SA (taking requests in and answers out),
    /// by this process's clock: the SA's own share of the CPU.
    pub sa_ns: u64,
    /// The SM's election state at the end, as OpenSM's log names it:
    /// `MASTER`, `STANDBY`, `DISCOVERING` or `NOT ACTIVE`.
    pub sm_state: String,
    /// Times this SM took the subnet over from a master.
    pub takeovers: u32,
    /// Its election priority.
    pub priority: u8,
    /// Every node.
    pub table: Vec<NodeRow>,
}

/// Why the SM could not run.
#[derive(Debug, thiserror::Error)]
pub enum SmdError {
    /// Under libumad2sim, no simulator serves the control socket.
    #[error("no simulator serves @{name} ({why}): start ibsim or `ibkit fabric serve --socket {base}`, or set IBSIM_SOCKNAME")]
    NoSimulator {
        /// The control socket's abstract name.
        name: String,
        /// The socket base name.
        base: String,
        /// What connecting said.
        why: std::io::Error,
    },
    /// Opening the port did not finish in time.
    #[error("opening the umad port took over {} s (is the simulator or the HCA's driver answering?)", .0.as_secs())]
    OpenTimeout(Duration),
    /// libibumad refused: no library, no device, a failed call.
    #[error(transparent)]
    Umad(#[from] verbs_sys::Error),
    /// The SM stopped with an error.
    #[error(transparent)]
    Sm(#[from] SmError),
    /// The SM failed without saying why.
    #[error("bring-up failed")]
    Failed,
    /// `--once`, and the SM's own port is down: there is no subnet to
    /// bring up (without `--once` the SM waits for the port).
    #[error(
        "the SM's own port is down: no subnet to bring up (without --once the SM waits for it)"
    )]
    SmPortDown,
    /// The partition configuration cannot be read or is refused.
    #[error("partitions: {0}")]
    Partitions(String),
    /// The root GUID file cannot be read or is refused.
    #[error("root_guid_file: {0}")]
    RootGuids(String),
    /// The hop weights, port search order or port profile ignore file
    /// cannot be read or is refused.
    #[error("{0}")]
    PortSelection(String),
    /// The routing order file cannot be read or is refused.
    #[error("guid_routing_order_file: {0}")]
    RoutingOrder(String),
    /// The `file` engine's LFT file cannot be read or is refused.
    #[error("lfts_file: {0}")]
    LftsFile(String),
    /// The node name map cannot be read or is refused.
    #[error("node name map: {0}")]
    NodeNameMap(String),
    /// The QoS configuration cannot be read or is refused.
    #[error("qos: {0}")]
    Qos(String),
    /// The configuration file (`ibkit sm --config`) is refused.
    #[error("config: {0}")]
    Config(String),
    /// The VM control socket could not be opened.
    #[error("{0}")]
    VmSocket(String),
    /// The simulator's socket refused or failed.
    #[error("simulator: {0}")]
    Sim(String),
    /// The SA did not answer a query.
    #[error("the SA at LID {sm_lid} did not answer in {attempts} tries of {ms} ms")]
    SaTimeout {
        /// The SM's LID the query went to.
        sm_lid: u16,
        /// Times the query was sent.
        attempts: u32,
        /// Milliseconds waited each time.
        ms: u64,
    },
    /// Through libumad2sim, an answer reached the bytes it damages.
    #[error("the answer reaches bytes 224..256 of its MADs, which libumad2sim damages on delivery ({records} record(s) in {segments} MAD(s)): use the simulator's socket directly (--transport ibsim)")]
    SaDamaged {
        /// MADs in the answer.
        segments: u32,
        /// Whole records in it.
        records: usize,
    },
    /// The SA's RMPP transfer failed.
    #[error("the SA's answer failed: {0}")]
    SaTransfer(sa::ReceiveError),
    /// The capture file could not be written.
    #[error("cannot write the capture {0}: {1}")]
    Capture(String, String),
}

/// Under libumad2sim (LD_PRELOAD names it), the simulator's control
/// socket must be there: libumad2sim would otherwise wait for it forever,
/// silently, on the first umad call.
pub fn check_simulator() -> Result<(), SmdError> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let preload = std::env::var("LD_PRELOAD").unwrap_or_default();
    if !preload.contains("umad2sim") {
        return Ok(());
    }
    let base = std::env::var("IBSIM_SOCKNAME")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "sim".into());
    let name = fabric::ibsim::ctl_name(&base);
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    let probe = SocketAddr::from_abstract_name(&b)
        .and_then(|addr| UnixDatagram::unbound()?.connect_addr(&addr));
    probe.map_err(|why| SmdError::NoSimulator { name, base, why })
}

/// Opens the umad port, or gives up after `wait` (the opening thread is
/// left blocked; the caller is expected to end).
fn open_bounded(
    ca: Option<String>,
    port: u8,
    guid: Option<u64>,
    wait: Duration,
) -> Result<UmadPort, SmdError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(match guid {
            Some(g) => verbs_sys::umad::port_by_guid(g)
                .and_then(|(ca, port)| UmadPort::open(Some(&ca), port)),
            None => UmadPort::open(ca.as_deref(), port),
        });
    });
    match rx.recv_timeout(wait) {
        Ok(r) => Ok(r?),
        Err(_) => Err(SmdError::OpenTimeout(wait)),
    }
}

/// Runs the SM until the subnet is up (`once`), or, for good, keeping
/// the subnet up and answering SA queries on QP1, until `stop` is set (a
/// SIGTERM handler sets it).
pub fn run(c: &SmdConfig, stop: &AtomicBool) -> Result<SmRun, SmdError> {
    let timeout = c.timeout_ms.min(i32::MAX as u64) as i32;
    // A broken partition file is refused before the fabric is touched.
    if let Some(p) = &c.partitions {
        read_partitions(p)?;
    }
    qos_tables(c)?;
    c.qos_policy.as_deref().map(read_qos_policy).transpose()?;
    // The routing files: each read once, a broken one refused before the
    // fabric is touched, with its place (the file engine's tables may be
    // large).
    let mut read = Read {
        names: names::NodeNames::default(),
        lfts: lfts_for(c)?,
        roots: Vec::new(),
        order: Vec::new(),
        port_selection: c.port_selection.read()?,
    };
    if let Some(p) = &c.root_guid_file {
        read.roots = read_root_guids(p)?;
        tracing::info!(
            "roots: {} switch GUID(s) from {}",
            read.roots.len(),
            p.display()
        );
    }
    if let Some(p) = &c.guid_routing_order_file {
        read.order = read_routing_order(p)?;
        let n = read.order.len();
        tracing::info!("routing order: {n} port GUID(s) from {}", p.display());
    }
    let sel = &read.port_selection;
    if *sel != smi::sm::PortSelection::default() {
        tracing::info!(
            "port selection: {} hop weight(s), {} port search order(s), port_shifting {}, scatter_ports {}",
            sel.hop_weights.len(),
            sel.search_order.len(),
            sel.shifting,
            sel.scatter
        );
    }
    read.names = match &c.node_name_map {
        Some(p) => {
            let n = read_node_name_map(p)?;
            tracing::info!("node names: {} from {}", n.len(), p.display());
            n
        }
        None => names::NodeNames::default(),
    };
    let mut capture = c.pcap.as_deref().map(Capture::create).transpose()?;
    match &c.via {
        Via::Umad { ca, port, guid } => {
            check_simulator()?;
            let port = open_bounded(ca.clone(), *port, *guid, c.open_wait)?;
            let attr = port.attr().clone();
            tracing::info!(
                "{} port {} (GUID {:#018x}, state {})",
                attr.ca,
                attr.port,
                attr.guid,
                attr.state
            );
            let mut wire = UmadWire::new(port, timeout)?;
            // ACKs of the SA's own RMPP do not come back to a umad agent
            // (the receiver's kernel sends them to its own agent's TID
            // space, and libumad2sim has no RMPP at all): every segment
            // goes at once. Under libumad2sim every requester on QP 1 is
            // a libumad2sim client, which the segments after the first
            // would crash (see `SaConfig::first_segment_to_qp1`).
            let under_umad2sim = std::env::var("LD_PRELOAD").is_ok_and(|p| p.contains("umad2sim"));
            drive(
                c,
                read,
                &mut wire,
                attr.guid,
                under_umad2sim,
                capture.as_mut(),
                stop,
            )
        }
        Via::Sim { socket, node, guid } => {
            let mut wire = SimWire::attach(socket, node.as_deref())?;
            if let Some(g) = guid.filter(|&g| g != wire.guid()) {
                return Err(SmdError::Sim(format!(
                    "--guid {g:#018x}: the simulator attached this SM at node {} (port GUID {:#018x}); \
                     name the node with --sim-host, or use --transport umad",
                    wire.node(),
                    wire.guid()
                )));
            }
            tracing::info!(
                "simulator @{socket}, node {} (port GUID {:#018x}), as its SM",
                wire.node(),
                wire.guid()
            );
            // ibsim delivers no RMPP ACK to the SA (it routes a response
            // by the requester's TID), and a QP-1 requester on a
            // simulator is a libumad2sim client: as under umad.
            let own = wire.guid();
            drive(c, read, &mut wire, own, true, capture.as_mut(), stop)
        }
    }
}

/// The sans-IO SM's settings for a daemon configured with `c`: no
/// periodic sweep with `--once` or `sweep_ms` 0 (as OpenSM's
/// `sweep_interval 0`), the M_Key and its protection as given.
fn sm_config(c: &SmdConfig) -> SmConfig {
    SmConfig {
        routing: c.routing,
        file_fallback: c.file_fallback,
        connect_roots: c.connect_roots,
        lash_start_vl: c.lash_start_vl,
        lid_policy: c.lid_policy,
        timeout_ms: c.timeout_ms,
        long_timeout_ms: c.long_timeout_ms,
        retries: c.retries,
        window: c.window,
        window2: c.window2,
        stuck_ms: c.stuck_ms,
        sweep_interval_ms: (!c.once && c.sweep_ms > 0).then_some(c.sweep_ms),
        force_heavy_sweep: c.force_heavy_sweep,
        m_key: mad_core::MKey(c.m_key),
        m_key_protect_bits: c.m_key_protect_bits,
        m_key_lease_period: c.m_key_lease_period,
        m_key_lookup: c.m_key_lookup,
        m_key_per_port: c.m_key_per_port,
        subnet_time_out: c.subnet_timeout,
        link: c.link,
        priority: c.priority,
        sm_key: c.sm_key,
        poll_ms: c.poll_ms,
        polling_retries: c.poll_retries,
        reassign_lids: c.reassign_lids,
        lmc: c.lmc,
        lmc_esp0: c.lmc_esp0,
        no_clients_rereg: c.no_clients_rereg,
        subnet_prefix: c.subnet_prefix,
        part_enforce: c.part_enforce,
        allow_both_pkeys: c.allow_both_pkeys,
        keep_pkey_indexes: c.keep_pkey_indexes,
        honor_guid2lid_file: c.honor_guid2lid_file,
        sweep_on_trap: c.sweep_on_trap,
        babbling_port_policy: c.babbling_port_policy,
        ignore_other_sm: c.ignore_other_sm,
        sm_inactive: c.sm_inactive,
        disable_multicast: c.disable_multicast,
        use_mfttop: c.use_mfttop,
        use_optimized_slvl: c.use_optimized_slvl,
        ..SmConfig::default()
    }
}

/// What the SM reads before it starts, once: the node names, the
/// `file` engine's tables, the roots, the routing order and the port
/// selection.
struct Read {
    names: names::NodeNames,
    lfts: Option<smi::sm::LftFile>,
    roots: Vec<u64>,
    order: Vec<u64>,
    port_selection: smi::sm::PortSelection,
}

/// The `file` engine's tables for `c`: read under `--routing file` (other
/// engines do not read the file, OpenSM's neither).
fn lfts_for(c: &SmdConfig) -> Result<Option<smi::sm::LftFile>, SmdError> {
    if c.routing == Engine::Lash && !c.qos {
        // OpenSM's man page asks `-R lash -Q` for the same reason.
        tracing::warn!(
            "routing lash without qos: the ports' SL-to-VL tables stay as they are, so LASH's SLs may share a VL and deadlock"
        );
    }
    Ok(match (&c.lfts_file, c.routing) {
        (Some(p), Engine::File) => {
            let t = read_lfts_file(p)?;
            tracing::info!(
                "lfts_file: {} switch(es), {} route(s) from {}",
                t.switches.len(),
                t.routes(),
                p.display()
            );
            Some(t)
        }
        (Some(p), e) => {
            tracing::warn!(
                "lfts_file {}: not read, the routing engine is {} (only `file` reads it)",
                p.display(),
                e.name()
            );
            None
        }
        (None, Engine::File) => {
            tracing::warn!(
                "routing file without an lfts_file: {}, as OpenSM's",
                c.file_fallback.name()
            );
            None
        }
        (None, _) => None,
    })
}

/// The driver loop over any [`Wire`], the SM on the port of GUID
/// `own_guid`, with what was `read` before it (its dumps naming nodes by
/// the names).
fn drive(
    c: &SmdConfig,
    read: Read,
    wire: &mut dyn Wire,
    own_guid: u64,
    first_segment_to_qp1: bool,
    mut capture: Option<&mut Capture>,
    stop: &AtomicBool,
) -> Result<SmRun, SmdError> {
    let Read {
        names,
        lfts,
        roots,
        order,
        port_selection,
    } = read;
    let names = &names;
    let mut sa = Sa::new(SaConfig {
        rmpp_acks: false,
        first_segment_to_qp1,
        sm_key: c.sa_key,
        sm_info_key: c.sm_key,
        sm_priority: c.priority,
        assigned_guid_byte: c.assigned_guid_byte,
        disable_multicast: c.disable_multicast,
        mcgroup_join_validation: c.mcgroup_join_validation,
        ipoib_mcgroup_creation_validation: c.ipoib_mcgroup_creation_validation,
        consolidate_ipv6_snm_req: c.consolidate_ipv6_snm_req,
        use_original_extended_sa_rates_only: c.use_original_extended_sa_rates_only,
        max_rate_enum: c.max_rate_enum,
        use_mfttop: c.use_mfttop,
        drop_event_subscriptions: c.drop_event_subscriptions,
        ..SaConfig::default()
    });
    // Only a master with the subnet up answers (C15-0.1.3).
    sa.set_serving(false);
    let (mut sa_answers, mut sa_ns) = (0u64, 0u64);
    let mut cfg = sm_config(c);
    cfg.root_guids = roots;
    cfg.lfts_file = lfts;
    cfg.routing_order = order;
    cfg.port_selection = port_selection;
    let mut sm = Sm::new(cfg);
    sm.set_own_port_guid(own_guid);
    if c.sm_inactive {
        tracing::info!(
            "SM NOT ACTIVE (sm_inactive): answering SMInfo only, until a master says Discover"
        );
    }
    if let Some(d) = &c.cache_dir {
        if let Some(lids) = read_cache(
            &d.join("guid2lid"),
            "LID(s)",
            "LIDs given afresh",
            dump::read_guid2lid,
        ) {
            sm.set_preferred_lids(lids);
        }
        if let Some(lids) = read_cache(
            &d.join("vf2lid"),
            "VF LID(s)",
            "LIDs given afresh",
            dump::read_vf2lid,
        ) {
            sm.set_preferred_vf_lids(lids);
        }
        if let Some(keys) = read_cache(
            &d.join("guid2mkey"),
            "M_Key(s)",
            "every port sent the configured m_key",
            dump::read_guid2mkey,
        ) {
            sm.set_known_m_keys(keys);
        }
        if let Some(links) = read_cache(
            &d.join("neighbors"),
            "link end(s)",
            "ports are known only once read",
            dump::read_neighbors,
        ) {
            sm.set_known_neighbors(links);
        }
    }
    // The SA database to restore once the subnet is first up, as master.
    let mut sa_db = c.sa_db_file.as_deref().and_then(read_sa_db);
    // The SA database last written: its generation, and when.
    let mut sa_db_written: Option<u64> = None;
    let mut sa_db_at = 0u64;
    // The files SIGHUP reads again (a re-read configuration may name
    // others).
    let mut files = Files {
        partitions: c.partitions.clone(),
        qos: c.qos,
        qos_config: c.qos_config.clone(),
        qos_policy: c.qos_policy.clone(),
        root_guid_file: c.root_guid_file.clone(),
        lfts_file: c.lfts_file.clone(),
        guid_routing_order_file: c.guid_routing_order_file.clone(),
        port_selection: c.port_selection.clone(),
    };
    // The subnet changed since the dumps were written.
    let mut dirty = false;
    // The SM's election state as last announced.
    let mut last_state: Option<SmState> = None;
    if let Some(p) = &c.partitions {
        let parts = read_partitions(p)?;
        tracing::info!(
            "partitions: {} from {}",
            parts.partitions.len(),
            p.display()
        );
        sm.set_partitions(parts);
    }
    if let Some(q) = qos_tables(c)? {
        tracing::info!(
            "QoS: {}",
            c.qos_config
                .as_ref()
                .map_or("OpenSM's defaults".into(), |p| p.display().to_string())
        );
        sm.set_qos(q);
    }
    if let Some(p) = &c.qos_policy {
        let policy = read_qos_policy(p)?;
        tracing::info!(
            "QoS policy: {} qos-ulps rule(s) from {}",
            policy.rules.len() + usize::from(policy.default_sl.is_some()),
            p.display()
        );
        sm.set_qos_policy(Some(policy));
    }
    let mut vm_socket = match &c.vm_socket {
        Some(p) => {
            let s = vmctl::VmSocket::bind(p).map_err(SmdError::VmSocket)?;
            tracing::info!("VM requests on {}", p.display());
            Some(s)
        }
        None => None,
    };
    let t0 = Instant::now();
    let ms = || t0.elapsed().as_millis() as u64;
    let mut up_ms = None;
    // A re-read partition configuration is being applied.
    let mut reapplied = false;
    let mut phase = sm.phase();
    // Handing over before a stop: until when to wait for the acknowledge.
    let mut handing: Option<u64> = None;
    // The SM's own LID, for the capture's LRHs (0 until it has one).
    let own_lid = |sm: &Sm| sm.nodes().first().map_or(0, |n| n.lid);
    // What systemd has been told (`Type=notify`).
    let mut readiness = notify::Readiness::new(c.ready_timeout_ms);
    let mut stopping = false;
    loop {
        if sm.phase() != phase {
            phase = sm.phase();
            tracing::info!(
                "phase {phase:?} after {:.1} ms",
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
        while let Some(t) = sm.poll_transmit(ms()) {
            let dlid = t.dlid.map(|l| l.0);
            tracing::debug!(
                "send {:?} {:?} mod {:#x} dlid {:#x} tid {:#x}",
                t.smp.method(),
                t.smp.attribute_id(),
                t.smp.attribute_modifier(),
                dlid.unwrap_or(0xFFFF),
                t.smp.header.transaction_id.get()
            );
            if let Some(cap) = capture.as_deref_mut() {
                let me = if dlid.is_some() { own_lid(&sm) } else { 0xFFFF };
                cap.mad(t.smp.as_wire(), smp_addr(dlid.unwrap_or(0xFFFF), me))?;
            }
            // A TrapRepress and the SM's answers expect no answer.
            // (A standby's trap to its master gets a TrapRepress, which
            // the SM ignores.)
            let answer = !matches!(
                t.smp.method(),
                Method::TrapRepress | Method::GetResp | Method::Trap
            );
            wire.send_smp(t.smp.as_wire(), dlid, answer)?;
        }
        if sm.phase() == Phase::Failed {
            return Err(sm.error().cloned().map_or(SmdError::Failed, SmdError::Sm));
        }
        // OpenSM's dumps and LID cache, once the subnet is up and after it
        // changed, by the master only.
        if dirty && sm.is_idle() && sm.sm_state() == mad_core::attr::SmState::Master {
            dirty = false;
            for e in dump::write_all(
                &sm,
                names,
                c.dump_dir.as_deref(),
                c.cache_dir.as_deref(),
                c.fsync_high_avail_files,
            ) {
                tracing::error!("{e}");
            }
            if let Some(d) = c
                .subnet_lst_dir
                .as_deref()
                .filter(|d| Some(*d) != c.dump_dir.as_deref())
            {
                for e in dump::write_subnet_lst(&sm, names, d) {
                    tracing::error!("{e}");
                }
            }
        }
        // The SA's database: restored the first time the subnet is up
        // under this SM as master (as OpenSM restores its -S file at its
        // first master sweep); written, with --dump-dir, when it changed,
        // at most once a second.
        let master = sm.sm_state() == mad_core::attr::SmState::Master;
        if master && sm.is_idle() {
            if let Some(d) = sa_db.take() {
                log_restored(&sa.restore(sm.subnet(), &d, ms(), epoch_s()));
            }
            if let Some(d) = c.sa_db_dir() {
                if sa_db_written != Some(sa.db_generation()) && ms() >= sa_db_at {
                    sa_db_written = Some(sa.db_generation());
                    sa_db_at = ms() + 1000;
                    write_sa_db(&sa, sm.subnet(), d, ms(), c.fsync_high_avail_files);
                }
            }
        }
        // Idle with its own port down, the SM waits for the port; `--once`
        // has nothing to wait for.
        let first_up = sm.is_idle() && up_ms.is_none();
        if first_up && sm.sm_port_down() && c.once {
            return Err(SmdError::SmPortDown);
        }
        if first_up && !sm.sm_port_down() {
            let t = t0.elapsed().as_secs_f64() * 1e3;
            up_ms = Some(t);
            tracing::info!("SUBNET UP after {t:.1} ms");
            if let Some(l) = sm.subnet().lash_layers() {
                // As OpenSM's "Lanes needed" and "Lanes in layer" lines.
                tracing::info!(
                    "lash: {} layer(s), pairs of switches in each: {:?}",
                    l.count,
                    l.pairs
                );
            }
            let st = sm.stats();
            let read = st.count(
                Method::Get,
                mad_core::attr::AttributeId::LinearForwardingTable,
            );
            if read > 0 {
                tracing::info!(
                    "LFT blocks: {read} read back, {} already right, {} sent",
                    st.lft_blocks_kept,
                    st.count(
                        Method::Set,
                        mad_core::attr::AttributeId::LinearForwardingTable
                    )
                );
            }
            log_pkey_overflow(&sm);
            // (The dumps were written just above: the SubnetUp event made
            // them due.)
            if c.once {
                break;
            }
        }
        // After the SUBNET UP line, so that a unit started after this
        // one finds it in the log.
        let role = match sm.sm_state() {
            mad_core::attr::SmState::Master if sm.subnet_up() && up_ms.is_some() => {
                notify::Role::Master {
                    nodes: sm.nodes().len(),
                    max_lid: sm.subnet().max_lid().0,
                }
            }
            mad_core::attr::SmState::Standby => notify::Role::Standby,
            mad_core::attr::SmState::NotActive => notify::Role::Inactive,
            _ => notify::Role::Starting,
        };
        if let Some(note) = readiness.update(role, ms()) {
            if note.ready {
                tracing::info!("ready: {}", note.status);
            }
            notify::send(&note);
        }
        if c.once && sm.phase() == Phase::Standby {
            if sm.sm_state() == mad_core::attr::SmState::NotActive {
                tracing::info!("not active: --once stops here");
            } else {
                tracing::info!("standing by: --once stops here");
            }
            break;
        }
        if stop.load(Ordering::Relaxed) {
            if !stopping {
                stopping = true;
                notify::stopping();
            }
            // A master hands the subnet to its best standby first, and
            // stops once it acknowledges (or after a second).
            match handing {
                None => {
                    if sm.hand_over() {
                        handing = Some(ms() + 1000);
                    } else {
                        tracing::info!("stopping");
                        break;
                    }
                }
                Some(t) if !sm.election().handing || ms() > t => {
                    if sm.sm_state() == mad_core::attr::SmState::Master {
                        tracing::warn!("no standby took the subnet; stopping");
                    } else {
                        tracing::info!("the standby took the subnet; stopping");
                    }
                    break;
                }
                Some(_) => {}
            }
        }
        if reapplied && sm.is_idle() {
            reapplied = false;
            log_pkey_overflow(&sm);
        }
        let hup = c
            .reload
            .as_ref()
            .is_some_and(|f| f.swap(false, Ordering::Relaxed));
        if hup {
            if readiness.is_ready() {
                notify::reloading(true);
            }
            if let Some(rc) = &c.reconfig {
                reread_config(rc, c, &mut files, &mut sm, &mut sa);
            }
            reread_files(&files, &mut sm, &mut reapplied, ms());
            sa.set_sm_priority(sm.election().priority);
            // As OpenSM: a SIGHUP also starts a heavy sweep (a master's).
            sm.request_heavy_sweep(ms());
            tracing::info!("SIGHUP: heavy sweep requested");
            if readiness.is_ready() {
                notify::reloading(false);
            }
        }
        // The SA answers only for a master that has brought the subnet
        // up, as OpenSM's (C15-0.1.3): a standby, or a master still in
        // its first sweep, ignores SA MADs.
        sa.set_serving(sm.sm_state() == mad_core::attr::SmState::Master && sm.subnet_up());
        let next = match (sm.poll_timeout(), sa.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // At most 20 ms asleep: a SIGTERM (the flag it sets) is seen
        // within that, so a handover starts at once.
        let wait = next.map_or(20, |t| t.saturating_sub(ms()).min(20));
        match wire.recv(wait.max(1))? {
            Some(Incoming::Sa { from, mad }) => {
                if let Some(cap) = capture.as_deref_mut() {
                    cap.mad(&mad, gs_addr(from.lid.0, from.qpn, own_lid(&sm), 1))?;
                }
                let t = Instant::now();
                let handled = sa.handle_mad(sm.subnet(), from, &mad, ms());
                sa_ns += t.elapsed().as_nanos() as u64;
                if let Err(e) = handled {
                    tracing::debug!("SA: {e}");
                }
            }
            Some(Incoming::Smp { slid, mad }) => {
                if let Some(cap) = capture.as_deref_mut() {
                    // A directed-route answer's LIDs are permissive.
                    let addr = if mad[1] == 0x81 {
                        smp_addr(0xFFFF, 0xFFFF)
                    } else {
                        smp_addr(own_lid(&sm), slid)
                    };
                    cap.mad(&mad, addr)?;
                }
                if let Ok(smp) = Smp::parse(&mad) {
                    tracing::debug!(
                        "recv {:?} {:?} mod {:#x} status {:#x} tid {:#x}",
                        smp.method(),
                        smp.attribute_id(),
                        smp.attribute_modifier(),
                        smp.header.status.get(),
                        smp.header.transaction_id.get()
                    );
                }
                if sm.handle_mad_from(&mad, Some(mad_core::Lid(slid)), ms()) == Handled::NotForSm {
                    tracing::debug!(
                        "not for the SM: a MAD of class {:#04x}",
                        mad.get(1).copied().unwrap_or(0)
                    );
                }
            }
            // A send the transport gave up on: the SM's own timer retries.
            Some(Incoming::SendFailed) => tracing::debug!("a send timed out"),
            None => {
                if let Some(cap) = capture.as_deref_mut() {
                    cap.flush()?;
                }
            }
        }
        if sm.poll_timeout().is_some_and(|t| t <= ms()) {
            sm.handle_timeout(ms());
        }
        if sa.poll_timeout().is_some_and(|t| t <= ms()) {
            sa.handle_timeout(ms());
        }
        // Questions about QoS tables the SM has now read (or waited
        // for long enough).
        sa.resume(sm.subnet(), ms());
        loop {
            let t0 = Instant::now();
            let Some(t) = sa.poll_transmit() else { break };
            sa_ns += t0.elapsed().as_nanos() as u64;
            let mad = &t.mad[..t.len.clamp(24, t.mad.len())];
            if let Some(cap) = capture.as_deref_mut() {
                cap.mad(mad, gs_addr(own_lid(&sm), 1, t.to.lid.0, t.to.qpn))?;
            }
            // A Report is a request: the transport tracks it so that the
            // subscriber's ReportResp reaches the SA (whose own timer
            // sends it again).
            let answer = t.mad[3] == u8::from(Method::Report);
            wire.send_sa(mad, t.to, answer)?;
            sa_answers += 1;
        }
        while let Some(e) = sm.poll_event() {
            log_event(&e, &|g| node_label(&sm, names, g));
            if let SmEvent::SmStateChanged { state, .. } = &e {
                // Out of standby (its master silent, or a handover), with
                // OpenSM's honor_guid2lid_file: the guid2lid read again
                // (another SM may have written it), before the new
                // master's discovery hears its first answer.
                let taking_over = last_state == Some(SmState::Standby)
                    && matches!(state, SmState::Discovering | SmState::Master);
                if taking_over && sm.config().honor_guid2lid_file {
                    if let Some(d) = &c.cache_dir {
                        let lids = read_cache(
                            &d.join("guid2lid"),
                            "LID(s) honoured taking over",
                            "the LIDs the ports hold kept",
                            dump::read_guid2lid,
                        );
                        sm.set_preferred_lids(lids.unwrap_or_default());
                    }
                }
                last_state = Some(*state);
            }
            dirty |= matches!(
                e,
                SmEvent::SubnetUp { .. }
                    | SmEvent::NodeAdded { .. }
                    | SmEvent::NodeLost { .. }
                    | SmEvent::LidsChanged { .. }
            );
            sa.handle_event(sm.subnet(), &e, ms());
        }
        // Alias GUIDs the SA granted or took back: the SM holds them and
        // writes the blocks to the ports.
        for c in sa.take_guid_changes() {
            dirty = true;
            match sm.set_guid_block(c.node, c.block, c.guids) {
                Ok(n) => tracing::debug!(
                    "alias GUIDs of node {} block {}: {n} Set(GUIDInfo)",
                    c.node.0,
                    c.block
                ),
                Err(e) => tracing::warn!("alias GUIDs of node {} not set: {e}", c.node.0),
            }
        }
        // VM requests (a master's subnet only: a standby refuses, as the
        // SM says the subnet is not up).
        if let Some(v) = vm_socket.as_mut() {
            if v.serve(&mut sm, Instant::now()) > 0 {
                dirty = true;
            }
        }
        // QoS tables an SA question named and the SM does not hold: it
        // reads them from the ports.
        for t in sa.take_qos_reads() {
            if let Err(e) = sm.read_qos_table(t) {
                tracing::debug!("QoS table {t:?} not read: {e}");
            }
        }
        // Joins, leaves and ports gone: the SM programs those groups'
        // multicast trees (only the MFT blocks that change).
        for (mlid, members) in sa.take_group_changes(sm.subnet()) {
            // The dumps (`opensm.mcfdbs`) follow, once the Sets are
            // answered.
            dirty = true;
            match sm.set_multicast_group(mlid, &members) {
                Ok(n) => tracing::debug!(
                    "multicast group {:#06x}: {} member(s), {n} Set(MFT)",
                    mlid.0,
                    members.len()
                ),
                Err(e) => tracing::warn!("multicast group {:#06x} not programmed: {e}", mlid.0),
            }
        }
    }
    // The SA's database at the stop, by a master, as OpenSM writes it.
    if let Some(d) = c.sa_db_dir() {
        let master = sm.sm_state() == mad_core::attr::SmState::Master;
        if master && up_ms.is_some() && sa_db_written != Some(sa.db_generation()) {
            write_sa_db(&sa, sm.subnet(), d, ms(), c.fsync_high_avail_files);
        }
    }
    if let Some(cap) = capture {
        cap.flush()?;
        tracing::info!("{} MADs captured", cap.frames);
    }
    let mut run = summary(&sm, up_ms);
    run.sa_sent = sa_answers;
    run.sa_answered = sa.stats().answered;
    run.sa_ns = sa_ns;
    Ok(run)
}

/// Reads a cache file: `Ok(None)` when there is none yet.
type CacheReader<K, V> = fn(&std::path::Path) -> Result<Option<dump::Cache<K, V>>, String>;

/// A cache (`guid2lid`, `vf2lid`, `guid2mkey`) read at start with `read`,
/// each skipped entry and the count of `what` logged: `None` when there
/// is none yet or it cannot be read (`otherwise` says what happens then).
fn read_cache<K, V>(
    path: &std::path::Path,
    what: &str,
    otherwise: &str,
    read: CacheReader<K, V>,
) -> Option<std::collections::BTreeMap<K, V>> {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    match read(path) {
        Ok(Some((map, warnings))) => {
            for w in &warnings {
                tracing::warn!("{}: line {}: {}; skipped", path.display(), w.line, w.what);
            }
            tracing::info!("{name}: {} {what} from {}", map.len(), path.display());
            Some(map)
        }
        Ok(None) => {
            tracing::info!("{name}: no {} yet", path.display());
            None
        }
        Err(e) => {
            tracing::error!("{name}: {e}; {otherwise}");
            None
        }
    }
}

/// The SA database `path` read for a restore: `None` (logged) when there
/// is none yet, or it cannot be read or is broken (the SA starts empty).
fn read_sa_db(path: &std::path::Path) -> Option<sa::db::SaDb> {
    match dump::read_sa_db(path) {
        Ok(None) => {
            tracing::info!("SA database: no {} yet", path.display());
            None
        }
        Ok(d) => d,
        Err(e) => {
            tracing::error!("SA database: {e}; the SA starts empty");
            None
        }
    }
}

/// Logs what a restore brought back, and each record it skipped.
fn log_restored(r: &sa::db::Restored) {
    tracing::info!(
        "SA database restored: {} group(s) with {} member(s), {} service(s), {} subscription(s); {} record(s) skipped",
        r.groups,
        r.members,
        r.services,
        r.subscriptions,
        r.skipped
    );
    for why in &r.reasons {
        tracing::warn!("SA database: {why}; skipped");
    }
    if r.alias_guids > 0 {
        tracing::info!("SA database: {} alias GUID(s) restored", r.alias_guids);
    }
}

/// Writes the SA's database as `opensm-sa.dump` into `dir` (at `now_ms`
/// on the SA's clock); a failure is logged, as OpenSM logs it.
fn write_sa_db(sa: &Sa, subnet: &smi::sm::Subnet, dir: &std::path::Path, now_ms: u64, sync: bool) {
    let text = sa.export(subnet, now_ms, epoch_s()).write();
    if let Err(e) = dump::write_sa_db(dir, &text, sync) {
        tracing::error!("{e}");
    }
}

/// Seconds since the epoch on the wall clock (services' set times are
/// written in it).
fn epoch_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The configuration files a running SM reads again on SIGHUP.
struct Files {
    partitions: Option<PathBuf>,
    qos: bool,
    qos_config: Option<PathBuf>,
    qos_policy: Option<PathBuf>,
    root_guid_file: Option<PathBuf>,
    lfts_file: Option<PathBuf>,
    guid_routing_order_file: Option<PathBuf>,
    port_selection: PortSelectionFiles,
}

/// Logs what an `opensm.conf` at `file` has that ibkit does not apply:
/// warnings where the subnet will differ from OpenSM's, the rest as
/// information.
pub fn log_opensm_notes(file: &Path, notes: &[opensm_conf::Note]) {
    for n in notes {
        let at = if n.line == 0 {
            file.display().to_string()
        } else {
            format!("{}: line {}", file.display(), n.line)
        };
        if n.warning {
            tracing::warn!("{at}: {}", n.text);
        } else {
            tracing::info!("{at}: {}", n.text);
        }
    }
}

impl SmdConfig {
    /// Where the SA's database is written: with the other dumps, else
    /// alone where `sa_db_dump_dir` says.
    fn sa_db_dir(&self) -> Option<&PathBuf> {
        self.dump_dir.as_ref().or(self.sa_db_dump_dir.as_ref())
    }
}

/// The milliseconds `max_smps_timeout` (µs) gives, rounded up; none
/// given, OpenSM's default (600 ms).
pub fn stuck_ms(max_smps_timeout_us: Option<u32>) -> u64 {
    max_smps_timeout_us.map_or(SmConfig::default().stuck_ms, |us| {
        u64::from(us).div_ceil(1000)
    })
}

/// The SM's window from `max_wire_smps`: 0 is no limit, as OpenSM reads
/// it; none, ibkit's default.
pub fn window(max_wire_smps: Option<u32>) -> usize {
    match max_wire_smps {
        None => SmConfig::default().window,
        Some(0) => usize::MAX,
        Some(w) => w as usize,
    }
}

/// SIGHUP: the configuration file read again (the command line still
/// winning). What a running SM can change changes now: priority, the
/// polling and sweep intervals, `polling_retry_number`, `max_wire_smps`,
/// `force_heavy_sweep`, `sweep_on_trap`, `part_enforce`, the log level, the
/// partition and QoS files; the rest is logged as taking effect at the next start. A
/// broken file is logged and changes nothing.
fn reread_config(rc: &Reconfig, c: &SmdConfig, files: &mut Files, sm: &mut Sm, sa: &mut Sa) {
    let read = if rc.opensm {
        opensm_conf::read_opensm_conf(&rc.file).map(|o| {
            log_opensm_notes(&rc.file, &o.notes);
            o.settings
        })
    } else {
        config::read_sm_file(&rc.file)
    };
    let f = match read {
        Ok(f) => f,
        Err(e) => {
            tracing::error!("{e}; the settings in force are kept");
            return;
        }
    };
    let g = &rc.flags;
    let priority = g.priority.or(f.priority).unwrap_or(0);
    if priority != sm.election().priority {
        tracing::info!("priority {} -> {priority}", sm.election().priority);
        sm.set_priority(priority);
    }
    let poll_ms = g.poll_ms.or(f.poll_ms).unwrap_or(500);
    let sweep_ms = (!c.once)
        .then(|| g.sweep_ms.or(f.sweep_ms).unwrap_or(10_000))
        .filter(|&ms| ms > 0);
    if poll_ms != c.poll_ms || sweep_ms != (!c.once && c.sweep_ms > 0).then_some(c.sweep_ms) {
        tracing::info!("poll every {poll_ms} ms, sweep every {sweep_ms:?} ms");
    }
    sm.set_intervals(poll_ms, sweep_ms);
    let poll_retries = g.poll_retries.or(f.poll_retries).unwrap_or(0);
    if poll_retries != sm.config().polling_retries {
        tracing::info!("poll_retries {poll_retries}");
    }
    sm.set_polling_retries(poll_retries);
    let window = window(g.max_wire_smps.or(f.max_wire_smps));
    if window != sm.config().window {
        tracing::info!("max_wire_smps {window}");
    }
    sm.set_window(window);
    let window2 = f.max_wire_smps2.map_or(0, |w| w as usize);
    let stuck_ms = stuck_ms(f.max_smps_timeout);
    if (window2, stuck_ms) != (sm.config().window2, sm.config().stuck_ms) {
        tracing::info!("max_wire_smps2 {window2}, max_smps_timeout {stuck_ms} ms");
    }
    sm.set_window2(window2, stuck_ms);
    let heavy = g.force_heavy_sweep.or(f.force_heavy_sweep).unwrap_or(false);
    if heavy != c.force_heavy_sweep {
        tracing::info!("force_heavy_sweep {heavy}");
    }
    sm.set_force_heavy_sweep(heavy);
    let on_trap = g.sweep_on_trap.or(f.sweep_on_trap).unwrap_or(true);
    if on_trap != sm.config().sweep_on_trap {
        tracing::info!("sweep_on_trap {on_trap}");
    }
    sm.set_sweep_on_trap(on_trap);
    // Switches of the SM and the SA: each said where it changes.
    let said = |name: &str, now: bool, was: bool| {
        if now != was {
            tracing::info!("{name} {now}");
        }
        now
    };
    let babbling = (g.babbling_port_policy.or(f.babbling_port_policy)).unwrap_or(false);
    let was = sm.config().babbling_port_policy;
    sm.set_babbling_port_policy(said("babbling_port_policy", babbling, was));
    let was = sa.config().clone();
    sa.set_drop_event_subscriptions(said(
        "drop_event_subscriptions",
        f.drop_event_subscriptions.unwrap_or(false),
        was.drop_event_subscriptions,
    ));
    sa.set_consolidate_ipv6_snm_req(said(
        "consolidate_ipv6_snm_req",
        (g.consolidate_ipv6_snm_req.or(f.consolidate_ipv6_snm_req)).unwrap_or(false),
        was.consolidate_ipv6_snm_req,
    ));
    sa.set_use_original_extended_sa_rates_only(said(
        "use_original_extended_sa_rates_only",
        (g.use_original_extended_sa_rates_only
            .or(f.use_original_extended_sa_rates_only))
        .unwrap_or(false),
        was.use_original_extended_sa_rates_only,
    ));
    let limit = (g.max_rate_enum.or(f.max_rate_enum)).unwrap_or(NO_RATE_LIMIT);
    if limit != was.max_rate_enum {
        tracing::info!("max_rate_enum {limit}");
    }
    sa.set_max_rate_enum(limit);
    let enforce = g.part_enforce.or(f.part_enforce).unwrap_or_default();
    if enforce != sm.config().part_enforce {
        let sent = sm.set_part_enforce(enforce);
        tracing::info!("part_enforce {}: {sent} SMPs", enforce.name());
    }
    let both = g.allow_both_pkeys.or(f.allow_both_pkeys).unwrap_or(false);
    if both != sm.config().allow_both_pkeys {
        let sent = sm.set_allow_both_pkeys(both);
        tracing::info!("allow_both_pkeys {both}: {sent} SMPs");
    }
    let honor = g
        .honor_guid2lid_file
        .or(f.honor_guid2lid_file)
        .unwrap_or(false);
    if honor != sm.config().honor_guid2lid_file {
        tracing::info!("honor_guid2lid_file {honor}");
    }
    sm.set_honor_guid2lid_file(honor);
    let keep = f.keep_pkey_indexes.unwrap_or(true);
    if keep != sm.config().keep_pkey_indexes {
        let sent = sm.set_keep_pkey_indexes(keep);
        tracing::info!("keep_pkey_indexes {keep}: {sent} SMPs");
    }
    if let (Some(level), Some(set)) = (
        g.log_level.as_ref().or(f.log_level.as_ref()),
        &rc.set_log_level,
    ) {
        set(level);
    }
    files.partitions = g.partitions.clone().or(f.partitions.clone());
    files.qos_config = g.qos_config.clone().or(f.qos_config.clone());
    files.qos_policy = g.qos_policy.clone().or(f.qos_policy.clone());
    files.root_guid_file = g.root_guid_file.clone().or(f.root_guid_file.clone());
    files.lfts_file = g.lfts_file.clone().or(f.lfts_file.clone());
    files.guid_routing_order_file =
        (g.guid_routing_order_file.clone()).or(f.guid_routing_order_file.clone());
    files.port_selection = port_selection_of(g, &f);
    let qos = g.qos == Some(true) || f.qos == Some(true) || files.qos_config.is_some();
    if files.qos && !qos {
        tracing::warn!("QoS stays on until the SM restarts");
    }
    files.qos |= qos;
    let later = [
        (
            "routing",
            g.routing.or(f.routing).is_some_and(|r| r != c.routing),
        ),
        (
            "file_fallback",
            g.file_fallback
                .or(f.file_fallback)
                .is_some_and(|r| r != c.file_fallback),
        ),
        ("sm_key", g.sm_key.or(f.sm_key).unwrap_or(1) != c.sm_key),
        ("sa_key", g.sa_key.or(f.sa_key).unwrap_or(1) != c.sa_key),
        ("m_key", f.m_key.unwrap_or(0) != c.m_key),
        (
            "m_key_protection_level",
            f.m_key_protection_level.unwrap_or(0) != c.m_key_protect_bits,
        ),
        (
            "m_key_lease_period",
            f.m_key_lease_period.unwrap_or(0) != c.m_key_lease_period,
        ),
        (
            "m_key_lookup",
            f.m_key_lookup.unwrap_or(true) != c.m_key_lookup,
        ),
        (
            "m_key_per_port",
            f.m_key_per_port.unwrap_or(false) != c.m_key_per_port,
        ),
        (
            "subnet_timeout",
            f.subnet_timeout.unwrap_or(18) != c.subnet_timeout,
        ),
        ("the link parameters", f.link_params() != c.link),
        (
            "sm_assigned_guid",
            f.sm_assigned_guid.unwrap_or(0) != c.assigned_guid_byte,
        ),
        ("dump_dir", g.dump_dir.clone().or(f.dump_dir) != c.dump_dir),
        ("sa_db_dump_dir", f.sa_db_dump_dir != c.sa_db_dump_dir),
        ("subnet_lst_dir", f.subnet_lst_dir != c.subnet_lst_dir),
        (
            "fsync_high_avail_files",
            f.fsync_high_avail_files.unwrap_or(true) != c.fsync_high_avail_files,
        ),
        (
            "node_name_map",
            g.node_name_map.clone().or(f.node_name_map) != c.node_name_map,
        ),
        (
            "cache_dir",
            g.cache_dir.clone().or(f.cache_dir) != c.cache_dir,
        ),
        (
            "sa_db_file",
            g.sa_db_file.clone().or(f.sa_db_file) != c.sa_db_file,
        ),
        (
            "vm_socket",
            g.vm_socket.clone().or(f.vm_socket) != c.vm_socket,
        ),
        (
            "reassign_lids",
            g.reassign_lids.or(f.reassign_lids).unwrap_or(false) != c.reassign_lids,
        ),
        ("lmc", g.lmc.or(f.lmc).unwrap_or(0) != c.lmc),
        (
            "lmc_esp0",
            g.lmc_esp0.or(f.lmc_esp0).unwrap_or(false) != c.lmc_esp0,
        ),
        (
            "connect_roots",
            g.connect_roots.or(f.connect_roots).unwrap_or(false) != c.connect_roots,
        ),
        (
            "lash_start_vl",
            g.lash_start_vl.or(f.lash_start_vl).unwrap_or(0) != c.lash_start_vl,
        ),
        (
            "subnet_prefix",
            f.subnet_prefix.unwrap_or(mad_core::Gid::DEFAULT_PREFIX) != c.subnet_prefix,
        ),
        (
            "disable_multicast",
            g.disable_multicast.or(f.disable_multicast).unwrap_or(false) != c.disable_multicast,
        ),
        (
            "sm_inactive",
            g.sm_inactive.or(f.sm_inactive).unwrap_or(false) != c.sm_inactive,
        ),
        ("use_mfttop", f.use_mfttop.unwrap_or(true) != c.use_mfttop),
        (
            "use_optimized_slvl",
            f.use_optimized_slvl.unwrap_or(true) != c.use_optimized_slvl,
        ),
        (
            "mcgroup_join_validation",
            f.mcgroup_join_validation.unwrap_or(true) != c.mcgroup_join_validation,
        ),
        (
            "ipoib_mcgroup_creation_validation",
            f.ipoib_mcgroup_creation_validation.unwrap_or(true)
                != c.ipoib_mcgroup_creation_validation,
        ),
        (
            "ignore_other_sm",
            g.ignore_other_sm.or(f.ignore_other_sm).unwrap_or(false) != c.ignore_other_sm,
        ),
        (
            "no_clients_rereg",
            (g.no_clients_rereg.or(f.no_clients_rereg)).unwrap_or(false) != c.no_clients_rereg,
        ),
        (
            "guid",
            match &c.via {
                Via::Umad { guid, .. } => g.guid.or(f.guid) != *guid,
                Via::Sim { guid, .. } => g.guid.or(f.guid) != *guid,
            },
        ),
        ("log_file", g.log_file.clone().or(f.log_file) != rc.log_file),
    ];
    for (key, changed) in later {
        if changed {
            tracing::warn!("{}: {key} changes at the next start", rc.file.display());
        }
    }
    tracing::info!("configuration re-read from {}", rc.file.display());
}

/// SIGHUP: the partition and QoS files read again and applied (only what
/// changes is sent); a broken file keeps what is in force.
fn reread_files(files: &Files, sm: &mut Sm, reapplied: &mut bool, now_ms: u64) {
    if let Some(p) = &files.qos_config {
        match read_qos(p) {
            Ok(q) => {
                let smps = sm.set_qos(q);
                tracing::info!("QoS re-read: {smps} SMP(s) queued");
            }
            Err(e) => tracing::error!("{e}; the QoS policy in force is kept"),
        }
    } else if files.qos {
        let smps = sm.set_qos(QosConfig::default());
        tracing::info!("QoS (OpenSM's defaults) applied: {smps} SMP(s) queued");
    }
    if let Some(p) = &files.qos_policy {
        match read_qos_policy(p) {
            Ok(policy) => {
                sm.set_qos_policy(Some(policy));
                tracing::info!("QoS policy re-read");
            }
            Err(e) => tracing::error!("{e}; the QoS policy in force is kept"),
        }
    }
    if let Some(p) = &files.partitions {
        match read_partitions(p) {
            Ok(parts) => {
                let n = parts.partitions.len();
                let smps = sm.set_partitions(parts);
                *reapplied = true;
                tracing::info!("partitions re-read: {n} partition(s), {smps} SMP(s) queued");
            }
            Err(e) => tracing::error!("{e}; the partitions in force are kept"),
        }
    }
    // OpenSM reads its root_guid_file and guid_routing_order_file again
    // at each routing; here at SIGHUP, and a change routes again (only
    // the blocks that change).
    match reread_guids(files.root_guid_file.as_deref(), read_root_guids) {
        Ok((guids, from)) => {
            let n = guids.len();
            if sm.set_root_guids(guids, now_ms) {
                tracing::info!("roots: {n} switch GUID(s) ({from}); routing again");
            }
        }
        Err(e) => tracing::error!("{e}; the roots in force are kept"),
    }
    match reread_guids(files.guid_routing_order_file.as_deref(), read_routing_order) {
        Ok((guids, from)) => {
            let n = guids.len();
            if sm.set_routing_order(guids, now_ms) {
                tracing::info!("routing order: {n} port GUID(s) ({from}); routing again");
            }
        }
        Err(e) => tracing::error!("{e}; the routing order in force is kept"),
    }
    match files.port_selection.read() {
        Ok(sel) => {
            let (w, o) = (sel.hop_weights.len(), sel.search_order.len());
            let (shift, scatter) = (sel.shifting, sel.scatter);
            if sm.set_port_selection(sel, now_ms) {
                tracing::info!(
                    "port selection: {w} hop weight(s), {o} port search order(s), \
                     port_shifting {shift}, scatter_ports {scatter}; routing again"
                );
            }
        }
        Err(e) => tracing::error!("{e}; the port selection in force is kept"),
    }
    // The file engine's tables: read again, and routed again where they
    // changed (OpenSM reads its lfts_file at each routing).
    if let (Some(p), Engine::File) = (&files.lfts_file, sm.config().routing) {
        match read_lfts_file(p) {
            Ok(t) => {
                let n = t.routes();
                if sm.set_lfts_file(Some(t), now_ms) {
                    tracing::info!(
                        "lfts_file: {n} route(s) from {}; routing again",
                        p.display()
                    );
                }
            }
            Err(e) => tracing::error!("{e}; the tables in force are kept"),
        }
    }
}

/// The port selection the command line `g` and the file `f` give, the
/// command line winning.
pub fn port_selection_of(g: &config::SmFile, f: &config::SmFile) -> PortSelectionFiles {
    PortSelectionFiles {
        hop_weights_file: (g.hop_weights_file.clone()).or(f.hop_weights_file.clone()),
        port_search_ordering_file: (g.port_search_ordering_file.clone())
            .or(f.port_search_ordering_file.clone()),
        port_shifting: g.port_shifting.or(f.port_shifting).unwrap_or(false),
        scatter_ports: g.scatter_ports.or(f.scatter_ports).unwrap_or(0),
        guid_routing_order_no_scatter: (g.guid_routing_order_no_scatter)
            .or(f.guid_routing_order_no_scatter)
            .unwrap_or(false),
        port_profile_switch_nodes: (g.port_profile_switch_nodes)
            .or(f.port_profile_switch_nodes)
            .unwrap_or(false),
        port_prof_ignore_file: (g.port_prof_ignore_file.clone())
            .or(f.port_prof_ignore_file.clone()),
        lmc_as_opensm: (g.lmc_as_opensm.or(f.lmc_as_opensm)).unwrap_or(false),
    }
}

/// A GUID file named at `path` read again (none named: no GUIDs), with
/// where the GUIDs came from.
fn reread_guids(
    path: Option<&Path>,
    read: fn(&Path) -> Result<Vec<u64>, SmdError>,
) -> Result<(Vec<u64>, String), SmdError> {
    match path {
        Some(p) => read(p).map(|g| (g, p.display().to_string())),
        None => Ok((Vec::new(), "none named".to_string())),
    }
}

/// The LRH and QPs of an SMP to `dlid` from `slid`.
fn smp_addr(dlid: u16, slid: u16) -> FrameAddr {
    FrameAddr {
        dlid,
        slid,
        dest_qp: 0,
        src_qp: 0,
    }
}

/// The LRH and QPs of a GS MAD from `slid`/`sqp` to `dlid`/`dqp`.
fn gs_addr(slid: u16, sqp: u32, dlid: u16, dqp: u32) -> FrameAddr {
    FrameAddr {
        dlid,
        slid,
        dest_qp: dqp,
        src_qp: sqp,
    }
}

/// An SM event in the log: the subnet up, nodes and traps at the info
/// level, LID changes at debug.
/// A node as the log names it: its GUID, and its name (the node name
/// map's, else its NodeDescription) where it has one, as OpenSM's log
/// gives both.
fn node_label(sm: &Sm, names: &names::NodeNames, guid: u64) -> String {
    let name = (sm.subnet().by_guid(mad_core::Guid(guid)))
        .and_then(|id| sm.nodes().get(id.0))
        .map(|n| dump::desc(names, n))
        .filter(|d| !d.is_empty());
    match name {
        Some(d) => format!("{guid:#018x} ({d:?})"),
        None => format!("{guid:#018x}"),
    }
}

/// Logs `e`, naming nodes by `who` (their GUID and name).
fn log_event(e: &SmEvent, who: &dyn Fn(u64) -> String) {
    match e {
        SmEvent::SubnetUp { nodes, max_lid } => {
            tracing::info!("subnet up: {nodes} nodes, LIDs up to {}", max_lid.0)
        }
        SmEvent::NodeAdded { node, guid } => {
            tracing::debug!("node {node} added: {}", who(guid.0))
        }
        SmEvent::NodeLost { node, guid } => {
            tracing::info!("node {node} lost: {}", who(guid.0))
        }
        SmEvent::Trap { issuer, number, .. } => {
            tracing::info!("trap {number:?} from LID {}", issuer.0)
        }
        SmEvent::LidsChanged { ports } => tracing::debug!("LIDs given to {ports} ports"),
        SmEvent::HandingOver { to } => {
            tracing::info!("Handing over to SM {:#018x} before stopping", to.0)
        }
        SmEvent::HandoverImpossible => tracing::info!("no SM in STANDBY to hand over to"),
        SmEvent::SmPortState { state } => match state {
            mad_core::attr::PortState::Down => {
                tracing::warn!("SM port is down: sweeps wait for it to come back")
            }
            mad_core::attr::PortState::Active => tracing::info!("SM port is Active again"),
            _ => tracing::warn!(
                "SM port is {state:?}: its link retrained; a heavy sweep, by directed route, follows"
            ),
        },
        SmEvent::VmLost {
            vm,
            guid,
            lid,
            hypervisor,
            vf,
        } => tracing::warn!(
            "VM {} (vGUID {:#018x}, LID {}) lost: hypervisor {} came back without its VF {vf}",
            vm.0,
            guid.0,
            lid.0,
            who(hypervisor.0)
        ),
        SmEvent::PortNotAsSet {
            guid,
            port,
            found,
            want,
            m_key_held,
            ..
        } => tracing::warn!(
            "heavy sweep: node {} port {port} held LID {} LMC {} SM LID {} {:?}{}, not LID {} LMC {} SM LID {} Active as set; setting it again",
            who(guid.0),
            found.0 .0,
            found.1,
            found.2 .0,
            found.3,
            if *m_key_held { "" } else { " and another M_Key, protection or lease" },
            want.0 .0,
            want.1,
            want.2 .0
        ),
        SmEvent::SwitchTablesNotAsSet {
            guid, found, want, ..
        } => tracing::warn!(
            "sweep: switch {} holds LinearFDBTop {:#06x} MulticastFDBTop {:#06x}, not {:#06x} {:#06x} as set (reset?); writing its tables again",
            who(guid.0),
            found.0,
            found.1,
            want.0,
            want.1
        ),
        SmEvent::DuplicateGuid {
            guid,
            port,
            kept,
            refused,
        } => tracing::error!(
            "duplicate GUID: node {:#018x} port {port} answers beyond node {} port {} and beyond node {} port {}; the first is kept, the second gets no link, LID or activation",
            guid.0,
            who(kept.0 .0),
            kept.1,
            who(refused.0 .0),
            refused.1
        ),
        SmEvent::DuplicatePortGuid {
            port_guid,
            held_by,
            refused,
            beyond,
        } => tracing::error!(
            "duplicate port GUID: node {:#018x}, beyond node {} port {}, answers with port GUID {:#018x}, which {} of node {} holds; that one keeps it, and the new node is not added (no link, LID or activation)",
            refused.0,
            who(beyond.0 .0),
            beyond.1,
            port_guid.0,
            holder_words(held_by.1),
            who(held_by.0 .0)
        ),
        SmEvent::DuplicateVGuid {
            vguid,
            held_by,
            hypervisor,
            vf,
        } => tracing::error!(
            "duplicate vGUID: VF {vf} of hypervisor {} runs a VM with GUID {:#018x}, which {} of node {} holds; that one keeps it, and the VM is not taken on",
            who(hypervisor.0),
            vguid.0,
            holder_words(held_by.1),
            who(held_by.0 .0)
        ),
        SmEvent::NoisyPort {
            guid,
            port,
            trap,
            repeats,
            disabled,
        } => match disabled {
            Some((g, p)) => tracing::error!(
                "node {} port {port}: trap {trap} {repeats} times in a row; disabled port {p} of {} (babbling_port_policy)",
                who(guid.0),
                who(g.0)
            ),
            None => tracing::error!(
                "node {} port {port}: trap {trap} {repeats} times in a row; unhealthy, its link routed around until it is quiet for a minute",
                who(guid.0)
            ),
        },
        SmEvent::PortQuiet { guid, port } => tracing::info!(
            "node {} port {port}: no trap 129-131 for a minute; its link is routed over again",
            who(guid.0)
        ),
        SmEvent::RoutingFellBack { wanted, used, reason } => tracing::error!(
            "routing: {} cannot route this fabric ({reason}); routed {} instead, as OpenSM would",
            wanted.name(),
            used.name()
        ),
        SmEvent::UpDownTurnAvoided { guid, lid } => tracing::warn!(
            "routing: OpenSM's up*/down* would route LID {lid} down into switch {} and up out of it again (a turn that can close a credit loop); routed up*/down* by legal trees instead",
            who(guid.0)
        ),
        SmEvent::SmStateChanged { state, master } => {
            let words = smi::sm::election::state_name(*state);
            match master {
                Some(g) if *state == mad_core::attr::SmState::Standby => {
                    tracing::info!("Entering {words} state (master SM {:#018x})", g.0)
                }
                _ => tracing::info!("Entering {words} state"),
            }
        }
    }
}

/// The run's result from the SM's state.
fn summary(sm: &Sm, up_ms: Option<f64>) -> SmRun {
    let st = sm.stats();
    let table = sm
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, n)| NodeRow {
            guid: n.info.node_guid.0,
            switch: n.is_switch(),
            port: n.end_port(),
            lid: n.lid,
            lft: if n.is_switch() {
                (0..=sm.max_lid()).map(|l| sm.lft_entry(i, l)).collect()
            } else {
                Vec::new()
            },
        })
        .collect();
    SmRun {
        table,
        nodes: sm.subnet().node_count(false),
        switches: sm.nodes().iter().filter(|n| n.is_switch()).count(),
        lids: sm.max_lid(),
        smps: st.total(),
        up_ms: up_ms.unwrap_or(f64::NAN),
        retries: st.retries,
        up: up_ms.is_some(),
        sa_answered: 0,
        sa_sent: 0,
        sa_ns: 0,
        sm_state: smi::sm::election::state_name(sm.sm_state()).into(),
        takeovers: sm.election().takeovers,
        priority: sm.election().priority,
    }
}

/// What of a node holds a GUID in the log's words: its port (VF 0) or a VF.
fn holder_words(vf: u16) -> String {
    if vf == 0 {
        "the port".to_string()
    } else {
        format!("VF {vf}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `lfts_file` is read a line at a time as `LftFile::parse` reads
    /// the text: CRLF ends and descriptions that are not UTF-8 read; a
    /// line, the routes or the bytes past their bound are refused with
    /// the line.
    #[test]
    fn an_lfts_file_is_read_line_by_line_within_bounds() {
        let dir = std::env::temp_dir().join(format!("smd-lfts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("lfts");
        let text = "Unicast lids [0-2] of switch Lid 2 guid 0x000000000000000a ('s'):\n\
                    0x0001 001 # Channel Adapter portguid 0x0000000000000101: 'h'\n\
                    0x0002 000 # Switch portguid 0x000000000000000a: 's'\n2 lids dumped\n";
        std::fs::write(&f, text).unwrap();
        let want = smi::sm::LftFile::parse(text).unwrap();
        assert_eq!(read_lfts_file(&f).unwrap(), want);
        let mut raw = text.replace('\n', "\r\n").into_bytes();
        let at = raw.iter().position(|&b| b == b'h').unwrap();
        raw[at] = 0xE9; // a Latin-1 description
        std::fs::write(&f, &raw).unwrap();
        assert_eq!(read_lfts_file(&f).unwrap(), want);
        let said = |r: Result<smi::sm::LftFile, SmdError>| r.unwrap_err().to_string();
        let long = format!("{text}# {}\n", "x".repeat(MAX_LFTS_LINE));
        std::fs::write(&f, long).unwrap();
        assert!(said(read_lfts_file(&f)).contains("line 5: longer than 4096 bytes"));
        std::fs::write(&f, text).unwrap();
        let e = said(read_lfts_file_within(&f, 1, MAX_LFTS_FILE_BYTES));
        assert!(e.contains("line 3: more than 1 routes"), "{e}");
        let e = said(read_lfts_file_within(&f, 10, 100));
        assert!(e.contains("line 2: longer than 100 bytes"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The log names a node by its GUID and its name: the node name
    /// map's where it has one, else its NodeDescription; a GUID no node
    /// has, by the GUID alone.
    #[test]
    fn the_log_names_nodes_by_guid_and_name() {
        let (_, sm, up) = fabric::sim::bring_up(
            "mport-ntree:4:2",
            fabric::sim::SimConfig::default(),
            SmConfig::default(),
        )
        .unwrap();
        assert!(up);
        let sw = sm.nodes().iter().find(|n| n.is_switch()).unwrap();
        let (guid, d) = (
            sw.info.node_guid.0,
            dump::desc(&names::NodeNames::default(), sw),
        );
        assert!(!d.is_empty());
        let none = names::NodeNames::default();
        assert_eq!(
            node_label(&sm, &none, guid),
            format!("{guid:#018x} ({d:?})")
        );
        let map = names::parse_node_name_map(&format!("{guid:#018x} \"spine-7\"\n")).unwrap();
        assert_eq!(
            node_label(&sm, &map, guid),
            format!("{guid:#018x} (\"spine-7\")")
        );
        assert_eq!(node_label(&sm, &none, 0x1234), "0x0000000000001234");
    }

    /// `sweep_ms` 0 is no periodic sweep (OpenSM's `sweep_interval 0`),
    /// as is `--once`; the M_Key settings reach the SM.
    #[test]
    fn the_sm_gets_the_sweep_and_the_m_key_as_configured() {
        let c = |once: bool, sweep_ms: u64| SmdConfig {
            once,
            sweep_ms,
            m_key: 0x5ec2e7,
            m_key_protect_bits: 2,
            m_key_lease_period: 60,
            ..SmdConfig::default()
        };
        assert_eq!(sm_config(&c(false, 500)).sweep_interval_ms, Some(500));
        assert_eq!(sm_config(&c(false, 0)).sweep_interval_ms, None);
        assert_eq!(sm_config(&c(true, 500)).sweep_interval_ms, None);
        let s = sm_config(&c(false, 500));
        assert_eq!(
            (s.m_key, s.m_key_protect_bits, s.m_key_lease_period),
            (mad_core::MKey(0x5ec2e7), 2, 60)
        );
        assert!(s.m_key_lookup, "OpenSM's default");
        let off = SmdConfig {
            m_key_lookup: false,
            ..c(false, 500)
        };
        assert!(!sm_config(&off).m_key_lookup);
        assert!(!s.no_clients_rereg, "OpenSM's default");
        let quiet = SmdConfig {
            no_clients_rereg: true,
            ..c(false, 500)
        };
        assert!(sm_config(&quiet).no_clients_rereg);
    }

    /// The JSON of a run: GUIDs as `0x…` strings, an SM that never came
    /// up with `null` milliseconds.
    #[test]
    fn a_run_serializes_as_ibkit_sm_prints_it() {
        let r = SmRun {
            nodes: 2,
            switches: 1,
            lids: 2,
            smps: 9,
            up_ms: f64::NAN,
            retries: 0,
            up: false,
            sa_answered: 0,
            sa_sent: 0,
            sa_ns: 0,
            sm_state: "STANDBY".into(),
            takeovers: 1,
            priority: 3,
            table: vec![NodeRow {
                guid: 0x2c9,
                switch: true,
                port: 0,
                lid: 1,
                lft: vec![0, 0, 1],
            }],
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["table"][0]["guid"], "0x00000000000002c9");
        assert_eq!(v["table"][0]["lft"], serde_json::json!([0, 0, 1]));
        assert!(v["up_ms"].is_null());
        assert_eq!(v["up"], false);
        assert_eq!(v["sm_state"], "STANDBY");
    }

    /// Without the preload there is nothing to check; with it and no
    /// simulator, the error names the socket and what to start.
    #[test]
    fn a_missing_simulator_is_named() {
        // One test sets the environment, so no other sees it change.
        std::env::set_var("LD_PRELOAD", "");
        assert!(check_simulator().is_ok());
        std::env::set_var("LD_PRELOAD", "/nowhere/libumad2sim.so");
        std::env::set_var("IBSIM_SOCKNAME", "smd-test-nobody-serves-this");
        let e = check_simulator().unwrap_err().to_string();
        std::env::remove_var("LD_PRELOAD");
        assert!(
            e.contains("smd-test-nobody-serves-this") && e.contains("ibkit fabric serve"),
            "{e}"
        );
    }
}
