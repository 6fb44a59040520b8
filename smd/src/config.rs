//! `ibkit sm --config FILE`: the SM's settings in a TOML file, what
//! OpenSM's `opensm.conf` offers and ibkit implements.
//!
//! ```toml
//! priority = 5              # 0-15, as OpenSM's sm_priority
//! sm_key = "0x1"            # a number, or a 0x string for any 64 bits
//! sa_key = "0x1"            # the SA's: a requester presenting it is trusted (OpenSM's sa_key)
//! m_key = "0x5ec2e7"        # written to every end port and put in every SMP (OpenSM's m_key)
//! m_key_protection_level = 1   # 0-3: what an SMP without it may do (OpenSM's)
//! m_key_lease_period = 60   # seconds a refused SMP's lease runs; 0: forever
//! m_key_lookup = true       # use the key each port is known to hold (guid2mkey; OpenSM's)
//! m_key_per_port = false    # true: each end port a key of its own, from its GUID and m_key
//! poll_ms = 500             # a standby's polls of its master
//! poll_retries = 0          # polls unanswered in a row before taking over (OpenSM's polling_retry_number)
//! sweep_ms = 10000          # light sweeps; 0: none (traps and SIGHUP still sweep)
//! force_heavy_sweep = false # true: every periodic sweep a heavy one (OpenSM's)
//! routing = "ftree"         # minhop, updn, ftree, file, dor, lash
//! file_fallback = "updn"    # under routing = "file", the engine where the file does not fit (OpenSM's routing_engine file,updn)
//! lid_policy = "prepopulated"   # VFs' LIDs: prepopulated or dynamic
//! timeout_ms = 200          # an SMP's answer waited for (OpenSM's transaction_timeout)
//! retries = 3               # then sent again (transaction_retries)
//! long_timeout_ms = 500     # for an optimized Set(SLtoVLMappingTable) (OpenSM's long_transaction_timeout)
//! max_wire_smps = 16        # SMPs in flight at once; 0: no limit (OpenSM's)
//! max_wire_smps2 = 0        # a window stuck full grows one at a time up to this (OpenSM's)
//! max_smps_timeout = 600000 # µs a full window waits for an answer before it grows (OpenSM's)
//! partitions = "partitions.conf"   # relative to this file
//! qos = true
//! qos_config = "opensm.conf"
//! qos_policy = "qos-policy.conf"
//! log_level = "info"        # error, warn, info, debug, trace
//! log_file = "/var/log/ibkit-sm.log"   # appended to; default: stderr
//! accum_log_file = true     # false: the log file emptied at the start (OpenSM's)
//! log_max_size = 0          # MiB: the log file emptied once it holds more; 0: never (OpenSM's)
//! log_prefix = "sm-a"       # before each log line's message, with ": " (OpenSM's log_prefix)
//! dump_dir = "/var/log"     # OpenSM's dumps: opensm-subnet.lst, opensm-lfts.dump, …
//! cache_dir = "/var/cache/ibkit"       # guid2lid and guid2mkey, read at start
//! honor_guid2lid_file = false  # true: taking over, guid2lid read again and its LIDs given (OpenSM's)
//! sa_db_file = "/var/log/opensm-sa.dump"  # the SA's groups, services, subscriptions, read at start
//! sa_db_dump_dir = "/var/log"   # the SA's opensm-sa.dump alone written here (OpenSM's sa_db_dump)
//! subnet_lst_dir = "/var/log"   # opensm-subnet.lst alone written here (OpenSM's at every sweep)
//! vm_socket = "/run/ibkit/vm.sock"  # VM requests (`ibkit vm`), mode 0600
//! reassign_lids = false     # true: number every port afresh at start (OpenSM's -r)
//! lmc = 0                   # 0-7: 2^lmc LIDs for every CA port (OpenSM's lmc)
//! lmc_esp0 = false          # true: enhanced switch ports 0 get 2^lmc LIDs too
//! connect_roots = false     # true: up*/down* routes the roots' LIDs by min-hop (OpenSM's -z)
//! lash_start_vl = 0         # LASH's first SL and VL (OpenSM's lash_start_vl)
//! no_clients_rereg = false  # true: never ask hosts to rejoin groups (OpenSM's)
//! subnet_prefix = "0xfe80000000000000" # every end port's GID prefix (OpenSM's)
//! part_enforce = "both"     # in, out, off: switch ports' partition enforcement (OpenSM's)
//! allow_both_pkeys = false  # true: a `both` member holds the full and the limited P_Key (OpenSM's)
//! keep_pkey_indexes = true  # false: every P_Key table packed afresh at each sweep (OpenSM's)
//! sweep_on_trap = true      # false: traps start no sweep (OpenSM's)
//! ignore_other_sm = false   # true: no election, master whatever SMs are there (OpenSM's)
//! sm_inactive = false       # true: start NOT ACTIVE, until a master says Discover (OpenSM's)
//! disable_multicast = false # true: no multicast forwarding written (OpenSM's)
//! use_mfttop = true         # false: switches' MulticastFDBTop left alone (OpenSM's)
//! babbling_port_policy = false   # true: a port sending the same trap 129-131 250 times in a row is disabled (OpenSM's)
//! use_optimized_slvl = true # false: a Set(SLtoVL) a pair of ports even where a switch takes one for all (OpenSM's)
//! drop_event_subscriptions = false   # true: a port that leaves loses its InformInfo subscriptions (OpenSM's)
//! mcgroup_join_validation = true     # false: a join's Q_Key, P_Key, SL… not checked against the group's (OpenSM's)
//! ipoib_mcgroup_creation_validation = true   # false: a new group's requested MGID not checked (OpenSM's)
//! consolidate_ipv6_snm_req = false   # true: IPv6 solicited-node groups of a partition share one MLID (OpenSM's)
//! use_original_extended_sa_rates_only = false   # true: the SA's rates 300 Gb/s at most, no 2x/HDR/NDR codes (OpenSM's)
//! max_rate_enum = 63        # the highest rate code the SA answers: 2-24, 63 no limit (OpenSM 3.3.24's)
//! root_guid_file = "roots"  # updn/ftree roots, a node GUID a line (OpenSM's)
//! guid_routing_order_file = "order"  # port GUIDs min-hop and updn route first, a GUID a line (OpenSM's)
//! guid_routing_order_no_scatter = false   # true: the routing order's ports are never scattered (OpenSM's)
//! hop_weights_file = "weights"  # SWITCH_GUID PORT WEIGHT a line: min-hop weighs a hop out of that port (OpenSM's)
//! port_search_ordering_file = "ports"  # SWITCH_GUID PORT... a line: the order its ports are tried in (OpenSM's)
//! port_shifting = false     # true: each switch's search starts where its ports' mean load points (OpenSM's)
//! scatter_ports = 0         # not 0: the seed of a random pick among the least used ports (OpenSM's)
//! port_profile_switch_nodes = false   # true: routes to switches' own LIDs count in a port's load (OpenSM's)
//! port_prof_ignore_file = "ignore"    # SWITCH_GUID PORT a line: routes out of it never counted (OpenSM's)
//! lmc_as_opensm = false     # true: under LMC, the LIDs above a port's base routed as OpenSM's min-hop and updn route them
//! lfts_file = "opensm-lfts.dump"  # the file engine's tables, in OpenSM's LFT dump layout (OpenSM's)
//! node_name_map = "/etc/rdma/ib-node-name-map"   # the names the dumps give nodes (OpenSM's node_name_map_name)
//! fsync_high_avail_files = true   # false: caches and the SA's database written without fsync (OpenSM's)
//! guid = "0x0002c90300001235"  # the port to run on (OpenSM's guid, -g)
//! subnet_timeout = 18       # PortInfo's SubnetTimeOut, 0-31 (OpenSM's)
//! head_of_queue_lifetime = 18        # switch-to-switch ports' HOQLife, 0-31 (OpenSM's)
//! leaf_head_of_queue_lifetime = 16   # switch ports to CAs
//! vl_stall_count = 7        # 0-7, switch-to-switch ports (OpenSM's)
//! leaf_vl_stall_count = 7   # switch ports to CAs
//! max_op_vls = 5            # 1-5: OperationalVLs at most (5: VL0-14)
//! local_phy_errors_threshold = 8     # 0-15 (OpenSM's)
//! overrun_errors_threshold = 8       # 0-15
//! packet_life_time = 18     # switches' LifeTimeValue, 0-31 (OpenSM's)
//! sm_sl = 0                 # end ports' MasterSMSL, 0-15 (OpenSM's)
//! force_link_width = 255    # LinkWidthEnabled: 0-31 (1 1X, 2 4X, 4 8X, 8 12X, 16 2X), 255 supported (OpenSM's)
//! force_link_speed = 15     # LinkSpeedEnabled: 0-7 (1 SDR, 2 DDR, 4 QDR), 15 supported (OpenSM's)
//! force_link_speed_ext = 31 # LinkSpeedExtEnabled: 0-15 (1 FDR, 2 EDR, 4 HDR, 8 NDR), 30 none, 31 supported
//! sm_assigned_guid = 0      # bits 39..32 of the alias GUIDs the SA makes (OpenSM's)
//! ready_timeout_s = 60      # 1-86400: under systemd, READY=1 at the latest this long after the start
//! ```
//!
//! Every key is optional; a flag given on the command line wins over the
//! file. An unknown key, a value of the wrong type or out of range is an
//! error naming the key and its line, before the fabric is touched. SIGHUP
//! reads the file again: priority, the intervals, force_heavy_sweep, the log level and the
//! partition and QoS files change at once, the rest at the next start.

use serde::Deserialize;
use smi::sm::{Engine, LidPolicy, PartEnforce};
use std::path::{Path, PathBuf};
use toml::Spanned;

/// A number as TOML holds it (to 2^63 - 1), or a `0x` string for any
/// 64-bit value.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
enum Number {
    Int(i64),
    Text(String),
}

/// The file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    priority: Option<Spanned<i64>>,
    sm_key: Option<Spanned<Number>>,
    sa_key: Option<Spanned<Number>>,
    m_key: Option<Spanned<Number>>,
    m_key_protection_level: Option<Spanned<i64>>,
    m_key_lease_period: Option<Spanned<i64>>,
    m_key_lookup: Option<bool>,
    m_key_per_port: Option<bool>,
    poll_ms: Option<Spanned<i64>>,
    poll_retries: Option<Spanned<i64>>,
    sweep_ms: Option<Spanned<i64>>,
    routing: Option<Spanned<String>>,
    file_fallback: Option<Spanned<String>>,
    lid_policy: Option<Spanned<String>>,
    timeout_ms: Option<Spanned<i64>>,
    long_timeout_ms: Option<Spanned<i64>>,
    retries: Option<Spanned<i64>>,
    max_wire_smps: Option<Spanned<i64>>,
    max_wire_smps2: Option<Spanned<i64>>,
    max_smps_timeout: Option<Spanned<i64>>,
    partitions: Option<PathBuf>,
    qos: Option<bool>,
    qos_config: Option<PathBuf>,
    qos_policy: Option<PathBuf>,
    log_level: Option<Spanned<String>>,
    log_file: Option<PathBuf>,
    accum_log_file: Option<bool>,
    log_max_size: Option<Spanned<i64>>,
    log_prefix: Option<Spanned<String>>,
    dump_dir: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    sa_db_file: Option<PathBuf>,
    sa_db_dump_dir: Option<PathBuf>,
    subnet_lst_dir: Option<PathBuf>,
    vm_socket: Option<PathBuf>,
    reassign_lids: Option<bool>,
    lmc: Option<Spanned<i64>>,
    lmc_esp0: Option<bool>,
    connect_roots: Option<bool>,
    lash_start_vl: Option<Spanned<i64>>,
    no_clients_rereg: Option<bool>,
    subnet_prefix: Option<Spanned<Number>>,
    root_guid_file: Option<PathBuf>,
    lfts_file: Option<PathBuf>,
    guid_routing_order_file: Option<PathBuf>,
    guid_routing_order_no_scatter: Option<bool>,
    hop_weights_file: Option<PathBuf>,
    port_search_ordering_file: Option<PathBuf>,
    port_shifting: Option<bool>,
    scatter_ports: Option<Spanned<i64>>,
    port_profile_switch_nodes: Option<bool>,
    port_prof_ignore_file: Option<PathBuf>,
    lmc_as_opensm: Option<bool>,
    node_name_map: Option<PathBuf>,
    fsync_high_avail_files: Option<bool>,
    part_enforce: Option<Spanned<String>>,
    allow_both_pkeys: Option<bool>,
    keep_pkey_indexes: Option<bool>,
    honor_guid2lid_file: Option<bool>,
    sweep_on_trap: Option<bool>,
    ignore_other_sm: Option<bool>,
    sm_inactive: Option<bool>,
    disable_multicast: Option<bool>,
    mcgroup_join_validation: Option<bool>,
    ipoib_mcgroup_creation_validation: Option<bool>,
    consolidate_ipv6_snm_req: Option<bool>,
    use_original_extended_sa_rates_only: Option<bool>,
    max_rate_enum: Option<Spanned<i64>>,
    use_mfttop: Option<bool>,
    babbling_port_policy: Option<bool>,
    use_optimized_slvl: Option<bool>,
    drop_event_subscriptions: Option<bool>,
    force_heavy_sweep: Option<bool>,
    guid: Option<Spanned<Number>>,
    sm_assigned_guid: Option<Spanned<i64>>,
    subnet_timeout: Option<Spanned<i64>>,
    head_of_queue_lifetime: Option<Spanned<i64>>,
    leaf_head_of_queue_lifetime: Option<Spanned<i64>>,
    vl_stall_count: Option<Spanned<i64>>,
    leaf_vl_stall_count: Option<Spanned<i64>>,
    max_op_vls: Option<Spanned<i64>>,
    local_phy_errors_threshold: Option<Spanned<i64>>,
    overrun_errors_threshold: Option<Spanned<i64>>,
    packet_life_time: Option<Spanned<i64>>,
    sm_sl: Option<Spanned<i64>>,
    force_link_width: Option<Spanned<i64>>,
    force_link_speed: Option<Spanned<i64>>,
    force_link_speed_ext: Option<Spanned<i64>>,
    ready_timeout_s: Option<Spanned<i64>>,
}

/// The settings a configuration file gives (each `None` when not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SmFile {
    /// Election priority, 0–15.
    pub priority: Option<u8>,
    /// SM_Key.
    pub sm_key: Option<u64>,
    /// The SA key (OpenSM's `sa_key`).
    pub sa_key: Option<u64>,
    /// The M_Key (OpenSM's `m_key`; 0: none).
    pub m_key: Option<u64>,
    /// M_KeyProtectBits, 0–3 (OpenSM's `m_key_protection_level`).
    pub m_key_protection_level: Option<u8>,
    /// M_KeyLeasePeriod in seconds (OpenSM's `m_key_lease_period`).
    pub m_key_lease_period: Option<u16>,
    /// Send each port the M_Key it is known to hold (OpenSM's
    /// `m_key_lookup`; default true).
    pub m_key_lookup: Option<bool>,
    /// A key of its own for each end port, derived from its GUID and
    /// `m_key` ([`smi::sm::SmConfig::m_key_per_port`]; default false).
    pub m_key_per_port: Option<bool>,
    /// A standby's polling interval, ms.
    pub poll_ms: Option<u64>,
    /// Polls of the master a standby lets go unanswered in a row before
    /// it takes over, 0–1,000 (OpenSM's `polling_retry_number`).
    pub poll_retries: Option<u32>,
    /// Light sweep interval, ms (0: no periodic sweep).
    pub sweep_ms: Option<u64>,
    /// Routing engine.
    pub routing: Option<Engine>,
    /// Under the file engine, the engine where the file does not fit
    /// (OpenSM's next engine in `routing_engine`).
    pub file_fallback: Option<Engine>,
    /// LID policy for hypervisors' VFs.
    pub lid_policy: Option<LidPolicy>,
    /// Milliseconds an SMP's answer is waited for, 10–10,000.
    pub timeout_ms: Option<u64>,
    /// Milliseconds the answer to a Set(SLtoVLMappingTable) with
    /// AllInputPorts or AllOutputPorts is waited for (OpenSM's
    /// `long_transaction_timeout`; below `timeout_ms`, `timeout_ms`),
    /// 0–3,600,000.
    pub long_timeout_ms: Option<u64>,
    /// Times an unanswered SMP is sent again, 0–20 (a standby's poll of
    /// its master too: detection takes `poll_ms + (retries + 1) ×
    /// timeout_ms`).
    pub retries: Option<u32>,
    /// SMPs in flight at once, 0 for no limit (OpenSM's `max_wire_smps`,
    /// which OpenSM also reads 0 as unlimited); 0–2^31-1.
    pub max_wire_smps: Option<u32>,
    /// The most SMPs in flight once the window is stuck full (OpenSM's
    /// `max_wire_smps2`; at or below `max_wire_smps`: no growth).
    pub max_wire_smps2: Option<u32>,
    /// Microseconds a full window waits for a response before it grows
    /// by one (OpenSM's `max_smps_timeout`; 600,000 by default).
    pub max_smps_timeout: Option<u32>,
    /// `partitions.conf`, relative paths taken from the file's directory.
    pub partitions: Option<PathBuf>,
    /// QoS with OpenSM's defaults.
    pub qos: Option<bool>,
    /// An `opensm.conf` with `qos_*` options.
    pub qos_config: Option<PathBuf>,
    /// A `qos-policy.conf`.
    pub qos_policy: Option<PathBuf>,
    /// The log level.
    pub log_level: Option<String>,
    /// The log file (appended to).
    pub log_file: Option<PathBuf>,
    /// Append to the log file (else empty it at the start; OpenSM's
    /// `accum_log_file`, default true).
    pub accum_log_file: Option<bool>,
    /// Empty the log file before a line once it holds more than this many
    /// MiB, 0–1,048,576 (OpenSM's `log_max_size`; 0, the default: never).
    pub log_max_size: Option<u32>,
    /// Written with ": " before the message of every log line, to tell
    /// one SM's lines from another's where they meet (OpenSM's
    /// `log_prefix`); at most 64 printable characters.
    pub log_prefix: Option<String>,
    /// Where OpenSM's dumps are written.
    pub dump_dir: Option<PathBuf>,
    /// Where `guid2lid` is read and written.
    pub cache_dir: Option<PathBuf>,
    /// Where the SA's own `opensm-sa.dump` is written, without the other
    /// dumps (OpenSM's `sa_db_dump`, into its `dump_files_dir`).
    pub sa_db_dump_dir: Option<PathBuf>,
    /// Where `opensm-subnet.lst` (and with fat-tree routing
    /// `opensm-ftree-ca-order.dump`) is written, without the other dumps:
    /// OpenSM writes it into its `dump_files_dir` whatever its log says.
    pub subnet_lst_dir: Option<PathBuf>,
    /// The SA database (`opensm-sa.dump`) restored at start.
    pub sa_db_file: Option<PathBuf>,
    /// The VM control socket (`ibkit sm --vm-socket`).
    pub vm_socket: Option<PathBuf>,
    /// Number every port afresh at start (OpenSM's `reassign_lids`).
    pub reassign_lids: Option<bool>,
    /// LMC of every CA port, 0–7 (OpenSM's `lmc`).
    pub lmc: Option<u8>,
    /// Enhanced switch ports 0 take the LMC too (OpenSM's `lmc_esp0`).
    pub lmc_esp0: Option<bool>,
    /// Up*/down* routes the roots' own LIDs by min-hop (OpenSM's
    /// `connect_roots`).
    pub connect_roots: Option<bool>,
    /// LASH's first SL and VL, 0–14 (OpenSM's `lash_start_vl`).
    pub lash_start_vl: Option<u8>,
    /// Never ask end ports' clients to reregister (OpenSM's
    /// `no_clients_rereg`).
    pub no_clients_rereg: Option<bool>,
    /// The subnet prefix written to every end port (OpenSM's
    /// `subnet_prefix`; default fe80::/64).
    pub subnet_prefix: Option<u64>,
    /// The root switches' GUIDs file (OpenSM's `root_guid_file`).
    pub root_guid_file: Option<PathBuf>,
    /// The `file` engine's tables (OpenSM's `lfts_file`).
    pub lfts_file: Option<PathBuf>,
    /// The ports routed first (OpenSM's `guid_routing_order_file`).
    pub guid_routing_order_file: Option<PathBuf>,
    /// The routing order's ports never scattered (OpenSM's
    /// `guid_routing_order_no_scatter`).
    pub guid_routing_order_no_scatter: Option<bool>,
    /// Min-hop's hop weights (OpenSM's `hop_weights_file`).
    pub hop_weights_file: Option<PathBuf>,
    /// The order switches try their ports in (OpenSM's
    /// `port_search_ordering_file`).
    pub port_search_ordering_file: Option<PathBuf>,
    /// OpenSM's `port_shifting`.
    pub port_shifting: Option<bool>,
    /// OpenSM's `scatter_ports`: 0 off, else the seed.
    pub scatter_ports: Option<u32>,
    /// OpenSM's `port_profile_switch_nodes`.
    pub port_profile_switch_nodes: Option<bool>,
    /// Ports whose routes never count in their load (OpenSM's
    /// `port_prof_ignore_file`).
    pub port_prof_ignore_file: Option<PathBuf>,
    /// Under LMC, the LIDs above a port's base routed as OpenSM's min-hop
    /// and up*/down* route them (ibkit's spread otherwise).
    pub lmc_as_opensm: Option<bool>,
    /// The node name map (OpenSM's `node_name_map_name`).
    pub node_name_map: Option<PathBuf>,
    /// The caches and the SA's database synced to the disk as they are
    /// written (OpenSM's `fsync_high_avail_files`; default true).
    pub fsync_high_avail_files: Option<bool>,
    /// Partition enforcement on the switch ports cabled to CAs (OpenSM's
    /// `part_enforce`, and `no_partition_enforcement` as `off`).
    pub part_enforce: Option<PartEnforce>,
    /// A partition's `both` member holds the full and the limited P_Key
    /// (OpenSM's `allow_both_pkeys`; default false).
    pub allow_both_pkeys: Option<bool>,
    /// A P_Key keeps its index in a port's table (OpenSM's
    /// `keep_pkey_indexes`; default true).
    pub keep_pkey_indexes: Option<bool>,
    /// Taking over, the `guid2lid` read again and its LIDs given (OpenSM's
    /// `honor_guid2lid_file`; default false).
    pub honor_guid2lid_file: Option<bool>,
    /// Traps start sweeps (OpenSM's `sweep_on_trap`).
    pub sweep_on_trap: Option<bool>,
    /// Take no part in the election (OpenSM's `ignore_other_sm`).
    pub ignore_other_sm: Option<bool>,
    /// Start NOT ACTIVE (OpenSM's `sm_inactive`).
    pub sm_inactive: Option<bool>,
    /// No multicast forwarding (OpenSM's `disable_multicast`).
    pub disable_multicast: Option<bool>,
    /// The SA checks a join's fields against the group's (OpenSM's
    /// `mcgroup_join_validation`; default true).
    pub mcgroup_join_validation: Option<bool>,
    /// The SA checks a new group's requested MGID (OpenSM's
    /// `ipoib_mcgroup_creation_validation`; default true).
    pub ipoib_mcgroup_creation_validation: Option<bool>,
    /// New IPv6 solicited-node groups share the MLID of one of their
    /// partition and scope (OpenSM's `consolidate_ipv6_snm_req`; default
    /// false).
    pub consolidate_ipv6_snm_req: Option<bool>,
    /// The SA's rates keep to the original extended codes, 300 Gb/s at
    /// most (OpenSM's `use_original_extended_sa_rates_only`; default
    /// false).
    pub use_original_extended_sa_rates_only: Option<bool>,
    /// The highest rate code the SA answers (OpenSM's `max_rate_enum`:
    /// 2–24, or 63 for no limit, the default).
    pub max_rate_enum: Option<u8>,
    /// Switches' MulticastFDBTop written (OpenSM's `use_mfttop`; default
    /// true).
    pub use_mfttop: Option<bool>,
    /// A port that keeps trapping 129-131 is disabled (OpenSM's
    /// `babbling_port_policy`; default false).
    pub babbling_port_policy: Option<bool>,
    /// One Set(SLtoVL) a switch with optimized programming (OpenSM's
    /// `use_optimized_slvl`; default true in ibkit, false in OpenSM).
    pub use_optimized_slvl: Option<bool>,
    /// A port that leaves the subnet loses its subscriptions (OpenSM's
    /// `drop_event_subscriptions`; default false).
    pub drop_event_subscriptions: Option<bool>,
    /// Every periodic sweep a heavy one (OpenSM's `force_heavy_sweep`).
    pub force_heavy_sweep: Option<bool>,
    /// The port to run on, by GUID (OpenSM's `guid`).
    pub guid: Option<u64>,
    /// Bits 39..32 of the alias GUIDs the SA makes (OpenSM's
    /// `sm_assigned_guid`).
    pub sm_assigned_guid: Option<u8>,
    /// PortInfo's SubnetTimeOut, 0–31 (OpenSM's `subnet_timeout`).
    pub subnet_timeout: Option<u8>,
    /// HOQLife of switch-to-switch ports, 0–31.
    pub head_of_queue_lifetime: Option<u8>,
    /// HOQLife of switch ports cabled to CAs, 0–31.
    pub leaf_head_of_queue_lifetime: Option<u8>,
    /// VLStallCount of switch-to-switch ports, 0–7.
    pub vl_stall_count: Option<u8>,
    /// VLStallCount of switch ports cabled to CAs, 0–7.
    pub leaf_vl_stall_count: Option<u8>,
    /// OperationalVLs at most, 1–5 (PortInfo's encoding).
    pub max_op_vls: Option<u8>,
    /// LocalPhyErrors threshold, 0–15.
    pub local_phy_errors_threshold: Option<u8>,
    /// OverrunErrors threshold, 0–15.
    pub overrun_errors_threshold: Option<u8>,
    /// Switches' LifeTimeValue, 0–31 (OpenSM's `packet_life_time`).
    pub packet_life_time: Option<u8>,
    /// End ports' MasterSMSL, 0–15 (OpenSM's `sm_sl`).
    pub sm_sl: Option<u8>,
    /// LinkWidthEnabled written to every linked port, 0–31 or 255
    /// (OpenSM's `force_link_width`; [`smi::sm::LinkParams`]).
    pub force_link_width: Option<u8>,
    /// LinkSpeedEnabled, 0–7 or 15 (OpenSM's `force_link_speed`).
    pub force_link_speed: Option<u8>,
    /// LinkSpeedExtEnabled, 0–15, 30 or 31 (OpenSM's
    /// `force_link_speed_ext`).
    pub force_link_speed_ext: Option<u8>,
    /// Under systemd, `READY=1` at the latest this many seconds after the
    /// start, 1–86,400 (default 60): a subnet that is not up by then does
    /// not hold the units ordered after the SM any longer.
    pub ready_timeout_s: Option<u64>,
}

impl SmFile {
    /// The link parameters this file gives, OpenSM's defaults for the
    /// rest.
    pub fn link_params(&self) -> smi::sm::LinkParams {
        let d = smi::sm::LinkParams::default();
        smi::sm::LinkParams {
            hoq_lifetime: self.head_of_queue_lifetime.unwrap_or(d.hoq_lifetime),
            leaf_hoq_lifetime: (self.leaf_head_of_queue_lifetime).unwrap_or(d.leaf_hoq_lifetime),
            vl_stall_count: self.vl_stall_count.unwrap_or(d.vl_stall_count),
            leaf_vl_stall_count: self.leaf_vl_stall_count.unwrap_or(d.leaf_vl_stall_count),
            max_op_vls: self.max_op_vls.unwrap_or(d.max_op_vls),
            local_phy_errors_threshold: (self.local_phy_errors_threshold)
                .unwrap_or(d.local_phy_errors_threshold),
            overrun_errors_threshold: (self.overrun_errors_threshold)
                .unwrap_or(d.overrun_errors_threshold),
            packet_life_time: self.packet_life_time.unwrap_or(d.packet_life_time),
            sm_sl: self.sm_sl.unwrap_or(d.sm_sl),
            force_link_width: self.force_link_width.unwrap_or(d.force_link_width),
            force_link_speed: self.force_link_speed.unwrap_or(d.force_link_speed),
            force_link_speed_ext: (self.force_link_speed_ext).unwrap_or(d.force_link_speed_ext),
        }
    }
}

/// What is wrong in a configuration file, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1.
    pub column: usize,
    /// Why.
    pub reason: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.reason
        )
    }
}

/// Line and column (from 1) of byte `at` of `text`.
fn place(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

/// `text` as a log prefix (`log_prefix`): 1–64 printable ASCII
/// characters, so that a line stays one line and says what it means.
pub fn log_prefix(text: &str) -> Result<String, String> {
    if text.is_empty() || text.len() > 64 {
        return Err("not 1-64 characters".into());
    }
    if !text.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        return Err("not printable ASCII".into());
    }
    Ok(text.to_string())
}

/// The log levels `log_level` takes.
pub const LOG_LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];

/// Reads a configuration from `text`; relative paths are taken from
/// `dir`.
pub fn parse_sm_file(text: &str, dir: &Path) -> Result<SmFile, ConfigError> {
    let raw: Raw = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map_or((1, 1), |s| place(text, s.start));
        ConfigError {
            line,
            column,
            reason: e.message().trim().to_string(),
        }
    })?;
    let bad = |at: std::ops::Range<usize>, reason: String| {
        let (line, column) = place(text, at.start);
        ConfigError {
            line,
            column,
            reason,
        }
    };
    let ranged = |v: &Option<Spanned<i64>>, key: &str, lo: i64, hi: i64| {
        v.as_ref()
            .map(|s| {
                let x = *s.get_ref();
                if (lo..=hi).contains(&x) {
                    Ok(x as u64)
                } else {
                    Err(bad(s.span(), format!("{key} = {x}: not {lo}-{hi}")))
                }
            })
            .transpose()
    };
    let key = |k: &Option<Spanned<Number>>, name: &str| -> Result<Option<u64>, ConfigError> {
        let Some(s) = k else { return Ok(None) };
        Ok(Some(match s.get_ref() {
            Number::Int(i) if *i >= 0 => *i as u64,
            Number::Int(i) => return Err(bad(s.span(), format!("{name} = {i}: negative"))),
            Number::Text(t) => {
                let hex = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"));
                hex.and_then(|h| u64::from_str_radix(h, 16).ok())
                    .ok_or_else(|| bad(s.span(), format!("{name} = {t:?}: not a 0x number")))?
            }
        }))
    };
    let sm_key = key(&raw.sm_key, "sm_key")?;
    let sa_key = key(&raw.sa_key, "sa_key")?;
    let m_key = key(&raw.m_key, "m_key")?;
    let subnet_prefix = key(&raw.subnet_prefix, "subnet_prefix")?;
    let guid = key(&raw.guid, "guid")?;
    let routing = match &raw.routing {
        None => None,
        Some(s) => Some(Engine::from_name(s.get_ref()).ok_or_else(|| {
            bad(
                s.span(),
                format!(
                    "routing = {:?}: not minhop, updn, ftree, file, dor or lash",
                    s.get_ref()
                ),
            )
        })?),
    };
    let file_fallback = match &raw.file_fallback {
        None => None,
        Some(s) => Some(
            Engine::from_name(s.get_ref())
                .filter(|&e| e != Engine::File)
                .ok_or_else(|| {
                    bad(
                        s.span(),
                        format!(
                            "file_fallback = {:?}: not minhop, updn, ftree, dor or lash",
                            s.get_ref()
                        ),
                    )
                })?,
        ),
    };
    let part_enforce = match &raw.part_enforce {
        None => None,
        Some(s) => Some(PartEnforce::from_opensm(s.get_ref()).ok_or_else(|| {
            bad(
                s.span(),
                format!("part_enforce = {:?}: not both, in, out or off", s.get_ref()),
            )
        })?),
    };
    let lid_policy = match &raw.lid_policy {
        None => None,
        Some(s) => Some(LidPolicy::from_name(s.get_ref()).ok_or_else(|| {
            bad(
                s.span(),
                format!(
                    "lid_policy = {:?}: not prepopulated or dynamic",
                    s.get_ref()
                ),
            )
        })?),
    };
    let log_level = match &raw.log_level {
        None => None,
        Some(s) if LOG_LEVELS.contains(&s.get_ref().as_str()) => Some(s.get_ref().clone()),
        Some(s) => {
            return Err(bad(
                s.span(),
                format!(
                    "log_level = {:?}: not one of {}",
                    s.get_ref(),
                    LOG_LEVELS.join(", ")
                ),
            ))
        }
    };
    let path = |p: &Option<PathBuf>| p.as_ref().map(|p| dir.join(p));
    let byte = |v: &Option<Spanned<i64>>, key: &str, hi: i64| {
        ranged(v, key, 0, hi).map(|x| x.map(|v| v as u8))
    };
    // A link code of OpenSM's: 0..=hi, or one of `also`.
    let link_code = |v: &Option<Spanned<i64>>, key: &str, hi: i64, also: &[i64]| {
        v.as_ref()
            .map(|s| {
                let x = *s.get_ref();
                if (0..=hi).contains(&x) || also.contains(&x) {
                    Ok(x as u8)
                } else {
                    let also: Vec<String> = also.iter().map(i64::to_string).collect();
                    Err(bad(
                        s.span(),
                        format!("{key} = {x}: not 0-{hi} or {}", also.join(" or ")),
                    ))
                }
            })
            .transpose()
    };
    Ok(SmFile {
        priority: ranged(&raw.priority, "priority", 0, 15)?.map(|v| v as u8),
        sm_key,
        sa_key,
        m_key,
        m_key_protection_level: ranged(
            &raw.m_key_protection_level,
            "m_key_protection_level",
            0,
            3,
        )?
        .map(|v| v as u8),
        m_key_lease_period: ranged(&raw.m_key_lease_period, "m_key_lease_period", 0, 65_535)?
            .map(|v| v as u16),
        m_key_lookup: raw.m_key_lookup,
        m_key_per_port: raw.m_key_per_port,
        poll_ms: ranged(&raw.poll_ms, "poll_ms", 10, 3_600_000)?,
        poll_retries: ranged(&raw.poll_retries, "poll_retries", 0, 1_000)?.map(|v| v as u32),
        sweep_ms: ranged(&raw.sweep_ms, "sweep_ms", 0, 86_400_000)?,
        routing,
        file_fallback,
        lid_policy,
        timeout_ms: ranged(&raw.timeout_ms, "timeout_ms", 10, 10_000)?,
        long_timeout_ms: ranged(&raw.long_timeout_ms, "long_timeout_ms", 0, 3_600_000)?,
        retries: ranged(&raw.retries, "retries", 0, 20)?.map(|v| v as u32),
        max_wire_smps: ranged(&raw.max_wire_smps, "max_wire_smps", 0, 0x7FFF_FFFF)?
            .map(|v| v as u32),
        max_wire_smps2: ranged(&raw.max_wire_smps2, "max_wire_smps2", 0, 0x7FFF_FFFF)?
            .map(|v| v as u32),
        max_smps_timeout: ranged(&raw.max_smps_timeout, "max_smps_timeout", 0, 0xFFFF_FFFF)?
            .map(|v| v as u32),
        partitions: path(&raw.partitions),
        qos: raw.qos,
        qos_config: path(&raw.qos_config),
        qos_policy: path(&raw.qos_policy),
        log_level,
        log_file: path(&raw.log_file),
        accum_log_file: raw.accum_log_file,
        log_prefix: match &raw.log_prefix {
            Some(p) => Some(
                log_prefix(p.get_ref())
                    .map_err(|e| bad(p.span(), format!("log_prefix = {:?}: {e}", p.get_ref())))?,
            ),
            None => None,
        },
        log_max_size: ranged(&raw.log_max_size, "log_max_size", 0, 1_048_576)?.map(|v| v as u32),
        dump_dir: path(&raw.dump_dir),
        cache_dir: path(&raw.cache_dir),
        sa_db_file: path(&raw.sa_db_file),
        sa_db_dump_dir: path(&raw.sa_db_dump_dir),
        subnet_lst_dir: path(&raw.subnet_lst_dir),
        vm_socket: path(&raw.vm_socket),
        reassign_lids: raw.reassign_lids,
        lmc: ranged(&raw.lmc, "lmc", 0, 7)?.map(|v| v as u8),
        lmc_esp0: raw.lmc_esp0,
        connect_roots: raw.connect_roots,
        lash_start_vl: ranged(&raw.lash_start_vl, "lash_start_vl", 0, 14)?.map(|v| v as u8),
        no_clients_rereg: raw.no_clients_rereg,
        subnet_prefix,
        root_guid_file: path(&raw.root_guid_file),
        lfts_file: path(&raw.lfts_file),
        guid_routing_order_file: path(&raw.guid_routing_order_file),
        guid_routing_order_no_scatter: raw.guid_routing_order_no_scatter,
        hop_weights_file: path(&raw.hop_weights_file),
        port_search_ordering_file: path(&raw.port_search_ordering_file),
        port_shifting: raw.port_shifting,
        scatter_ports: ranged(&raw.scatter_ports, "scatter_ports", 0, 0xFFFF_FFFF)?
            .map(|v| v as u32),
        port_profile_switch_nodes: raw.port_profile_switch_nodes,
        port_prof_ignore_file: path(&raw.port_prof_ignore_file),
        lmc_as_opensm: raw.lmc_as_opensm,
        node_name_map: path(&raw.node_name_map),
        fsync_high_avail_files: raw.fsync_high_avail_files,
        part_enforce,
        allow_both_pkeys: raw.allow_both_pkeys,
        keep_pkey_indexes: raw.keep_pkey_indexes,
        honor_guid2lid_file: raw.honor_guid2lid_file,
        sweep_on_trap: raw.sweep_on_trap,
        ignore_other_sm: raw.ignore_other_sm,
        sm_inactive: raw.sm_inactive,
        disable_multicast: raw.disable_multicast,
        mcgroup_join_validation: raw.mcgroup_join_validation,
        ipoib_mcgroup_creation_validation: raw.ipoib_mcgroup_creation_validation,
        consolidate_ipv6_snm_req: raw.consolidate_ipv6_snm_req,
        use_original_extended_sa_rates_only: raw.use_original_extended_sa_rates_only,
        max_rate_enum: (raw.max_rate_enum.as_ref())
            .map(|s| match *s.get_ref() {
                x @ (2..=24 | 63) => Ok(x as u8),
                x => Err(bad(
                    s.span(),
                    format!("max_rate_enum = {x}: not 2-24 or 63"),
                )),
            })
            .transpose()?,
        use_mfttop: raw.use_mfttop,
        babbling_port_policy: raw.babbling_port_policy,
        use_optimized_slvl: raw.use_optimized_slvl,
        drop_event_subscriptions: raw.drop_event_subscriptions,
        force_heavy_sweep: raw.force_heavy_sweep,
        guid,
        sm_assigned_guid: ranged(&raw.sm_assigned_guid, "sm_assigned_guid", 0, 255)?
            .map(|v| v as u8),
        subnet_timeout: byte(&raw.subnet_timeout, "subnet_timeout", 31)?,
        head_of_queue_lifetime: byte(&raw.head_of_queue_lifetime, "head_of_queue_lifetime", 31)?,
        leaf_head_of_queue_lifetime: byte(
            &raw.leaf_head_of_queue_lifetime,
            "leaf_head_of_queue_lifetime",
            31,
        )?,
        vl_stall_count: byte(&raw.vl_stall_count, "vl_stall_count", 7)?,
        leaf_vl_stall_count: byte(&raw.leaf_vl_stall_count, "leaf_vl_stall_count", 7)?,
        max_op_vls: ranged(&raw.max_op_vls, "max_op_vls", 1, 5)?.map(|v| v as u8),
        local_phy_errors_threshold: byte(
            &raw.local_phy_errors_threshold,
            "local_phy_errors_threshold",
            15,
        )?,
        overrun_errors_threshold: byte(
            &raw.overrun_errors_threshold,
            "overrun_errors_threshold",
            15,
        )?,
        packet_life_time: byte(&raw.packet_life_time, "packet_life_time", 31)?,
        sm_sl: byte(&raw.sm_sl, "sm_sl", 15)?,
        force_link_width: link_code(&raw.force_link_width, "force_link_width", 31, &[255])?,
        force_link_speed: link_code(&raw.force_link_speed, "force_link_speed", 7, &[15])?,
        force_link_speed_ext: link_code(
            &raw.force_link_speed_ext,
            "force_link_speed_ext",
            15,
            &[30, 31],
        )?,
        ready_timeout_s: ranged(&raw.ready_timeout_s, "ready_timeout_s", 1, 86_400)?,
    })
}

/// Reads and parses the configuration file `path` (bounded in size); a
/// refusal as "FILE: line L, column C: reason".
pub fn read_sm_file(path: &Path) -> Result<SmFile, crate::SmdError> {
    let bad = |why: String| crate::SmdError::Config(format!("{}: {why}", path.display()));
    let text = crate::read_bounded(path).map_err(bad)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse_sm_file(&text, dir).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_reads_and_paths_follow_the_file() {
        let text = "# ibkit sm\npriority = 5\nsm_key = \"0xffffffffffffffff\"\npoll_ms = 250\npoll_retries = 3\n\
                    sweep_ms = 5000\nrouting = \"ftree\"\nlid_policy = \"dynamic\"\n\
                    timeout_ms = 100\nlong_timeout_ms = 900\nretries = 5\nmax_wire_smps = 8\nmax_wire_smps2 = 12\nmax_smps_timeout = 1500\npartitions = \"p.conf\"\nqos = true\n\
                    qos_config = \"/etc/opensm/opensm.conf\"\nqos_policy = \"q.conf\"\n\
                    log_level = \"debug\"\nlog_file = \"sm.log\"\naccum_log_file = false\nlog_max_size = 64\ndump_dir = \"/var/log\"\nsa_db_dump_dir = \"sa\"\nsubnet_lst_dir = \"lst\"\nnode_name_map = \"names\"\nfsync_high_avail_files = false\n\
                    cache_dir = \"cache\"\nsa_db_file = \"opensm-sa.dump\"\nreassign_lids = true\n\
                    vm_socket = \"vm.sock\"\n\
                    sa_key = \"0x2a\"\nsm_assigned_guid = 7\nlmc = 2\nlmc_esp0 = true\nconnect_roots = true\n\
                    force_heavy_sweep = true\nno_clients_rereg = true\n\
                    subnet_prefix = \"0xfec0000000000001\"\nroot_guid_file = \"roots\"\nlfts_file = \"lfts\"\nfile_fallback = \"updn\"\nguid_routing_order_file = \"order\"\n\
                    guid_routing_order_no_scatter = true\nhop_weights_file = \"weights\"\nport_search_ordering_file = \"ports\"\nport_shifting = true\nscatter_ports = 4294967295\nport_profile_switch_nodes = true\nport_prof_ignore_file = \"ignore\"\nlmc_as_opensm = true\n\
                    part_enforce = \"out\"\nallow_both_pkeys = true\nkeep_pkey_indexes = false\nconsolidate_ipv6_snm_req = true\nuse_original_extended_sa_rates_only = true\nmax_rate_enum = 16\nhonor_guid2lid_file = true\nsweep_on_trap = false\nignore_other_sm = true\nsm_inactive = true\n\
                    disable_multicast = true\n\
                    mcgroup_join_validation = false\nipoib_mcgroup_creation_validation = false\n\
                    use_mfttop = false\nbabbling_port_policy = true\ndrop_event_subscriptions = true\nuse_optimized_slvl = false\n\
                    m_key = \"0xfedcba9876543210\"\n\
                    m_key_protection_level = 2\nm_key_lease_period = 60\nm_key_lookup = false\n\
                    m_key_per_port = true\n\
                    subnet_timeout = 17\nhead_of_queue_lifetime = 19\n\
                    leaf_head_of_queue_lifetime = 15\nvl_stall_count = 6\nleaf_vl_stall_count = 5\n\
                    max_op_vls = 3\nlocal_phy_errors_threshold = 9\noverrun_errors_threshold = 10\n\
                    packet_life_time = 20\nsm_sl = 3\nready_timeout_s = 90\n\
                    force_link_width = 2\nforce_link_speed = 4\nforce_link_speed_ext = 30\n\
                    guid = \"0x0002c90300001235\"\n";
        let f = parse_sm_file(text, Path::new("/etc/ibkit")).unwrap();
        assert_eq!(f.priority, Some(5));
        assert_eq!(f.sm_assigned_guid, Some(7));
        assert_eq!((f.sm_key, f.sa_key), (Some(u64::MAX), Some(0x2a)));
        assert_eq!((f.poll_ms, f.sweep_ms), (Some(250), Some(5000)));
        assert_eq!(f.poll_retries, Some(3));
        assert_eq!((f.accum_log_file, f.log_max_size), (Some(false), Some(64)));
        assert_eq!(f.max_wire_smps, Some(8));
        assert_eq!(f.long_timeout_ms, Some(900));
        assert_eq!(
            (f.max_wire_smps2, f.max_smps_timeout),
            (Some(12), Some(1500))
        );
        assert_eq!(f.routing, Some(Engine::FatTree));
        assert_eq!(f.lid_policy, Some(LidPolicy::Dynamic));
        assert_eq!((f.timeout_ms, f.retries), (Some(100), Some(5)));
        assert_eq!(f.partitions, Some(PathBuf::from("/etc/ibkit/p.conf")));
        assert_eq!(f.qos_config, Some(PathBuf::from("/etc/opensm/opensm.conf")));
        assert_eq!(f.qos, Some(true));
        assert_eq!(f.log_level.as_deref(), Some("debug"));
        assert_eq!(f.log_file, Some(PathBuf::from("/etc/ibkit/sm.log")));
        assert_eq!(f.dump_dir, Some(PathBuf::from("/var/log")));
        assert_eq!(f.sa_db_dump_dir, Some(PathBuf::from("/etc/ibkit/sa")));
        assert_eq!(f.subnet_lst_dir, Some(PathBuf::from("/etc/ibkit/lst")));
        assert_eq!(f.node_name_map, Some(PathBuf::from("/etc/ibkit/names")));
        assert_eq!(f.fsync_high_avail_files, Some(false));
        assert_eq!(f.cache_dir, Some(PathBuf::from("/etc/ibkit/cache")));
        assert_eq!(f.reassign_lids, Some(true));
        assert_eq!(f.vm_socket, Some(PathBuf::from("/etc/ibkit/vm.sock")));
        assert_eq!(f.lmc, Some(2));
        assert_eq!(f.lmc_esp0, Some(true));
        assert_eq!(f.connect_roots, Some(true));
        assert_eq!(f.force_heavy_sweep, Some(true));
        assert_eq!(f.no_clients_rereg, Some(true));
        assert_eq!(f.subnet_prefix, Some(0xfec0_0000_0000_0001));
        assert_eq!(f.root_guid_file, Some(PathBuf::from("/etc/ibkit/roots")));
        assert_eq!(f.lfts_file, Some(PathBuf::from("/etc/ibkit/lfts")));
        assert_eq!(f.file_fallback, Some(Engine::UpDown));
        assert_eq!(
            f.guid_routing_order_file,
            Some(PathBuf::from("/etc/ibkit/order"))
        );
        assert_eq!(f.guid_routing_order_no_scatter, Some(true));
        assert_eq!(
            f.hop_weights_file,
            Some(PathBuf::from("/etc/ibkit/weights"))
        );
        assert_eq!(
            f.port_search_ordering_file,
            Some(PathBuf::from("/etc/ibkit/ports"))
        );
        assert_eq!(
            (f.port_shifting, f.scatter_ports),
            (Some(true), Some(u32::MAX))
        );
        assert_eq!(f.port_profile_switch_nodes, Some(true));
        assert_eq!(f.lmc_as_opensm, Some(true));
        assert_eq!(
            f.port_prof_ignore_file,
            Some(PathBuf::from("/etc/ibkit/ignore"))
        );
        assert_eq!(f.part_enforce, Some(PartEnforce::Out));
        assert_eq!(f.allow_both_pkeys, Some(true));
        assert_eq!(f.keep_pkey_indexes, Some(false));
        assert_eq!(f.consolidate_ipv6_snm_req, Some(true));
        assert_eq!(f.use_original_extended_sa_rates_only, Some(true));
        assert_eq!(f.max_rate_enum, Some(16));
        assert_eq!(f.honor_guid2lid_file, Some(true));
        assert_eq!(f.sweep_on_trap, Some(false));
        assert_eq!(f.ignore_other_sm, Some(true));
        assert_eq!(f.sm_inactive, Some(true));
        assert_eq!(f.disable_multicast, Some(true));
        assert_eq!(f.mcgroup_join_validation, Some(false));
        assert_eq!(f.ipoib_mcgroup_creation_validation, Some(false));
        assert_eq!(f.use_mfttop, Some(false));
        assert_eq!(f.babbling_port_policy, Some(true));
        assert_eq!(f.use_optimized_slvl, Some(false));
        assert_eq!(f.drop_event_subscriptions, Some(true));
        assert_eq!(
            (f.m_key, f.m_key_protection_level, f.m_key_lease_period),
            (Some(0xfedc_ba98_7654_3210), Some(2), Some(60))
        );
        assert_eq!(f.m_key_lookup, Some(false));
        assert_eq!(f.m_key_per_port, Some(true));
        assert_eq!(f.subnet_timeout, Some(17));
        assert_eq!(f.ready_timeout_s, Some(90));
        assert_eq!(
            f.link_params(),
            smi::sm::LinkParams {
                hoq_lifetime: 19,
                leaf_hoq_lifetime: 15,
                vl_stall_count: 6,
                leaf_vl_stall_count: 5,
                max_op_vls: 3,
                local_phy_errors_threshold: 9,
                overrun_errors_threshold: 10,
                packet_life_time: 20,
                sm_sl: 3,
                force_link_width: 2,
                force_link_speed: 4,
                force_link_speed_ext: 30,
            }
        );
        assert_eq!(
            SmFile::default().link_params(),
            smi::sm::LinkParams::default()
        );
        assert_eq!(f.guid, Some(0x0002_c903_0000_1235));
        assert_eq!(
            f.sa_db_file,
            Some(PathBuf::from("/etc/ibkit/opensm-sa.dump"))
        );
        assert_eq!(
            parse_sm_file("sm_key = 7\n", Path::new("."))
                .unwrap()
                .sm_key,
            Some(7)
        );
        assert_eq!(
            parse_sm_file("", Path::new(".")).unwrap(),
            SmFile::default()
        );
    }

    #[test]
    fn what_is_wrong_is_named_with_its_line() {
        let bad = |t: &str| parse_sm_file(t, Path::new(".")).unwrap_err();
        let e = bad("priority = 5\nlog_files = \"/var/log/x\"\n");
        assert_eq!(e.line, 2, "{e}");
        assert!(e.reason.contains("log_files"), "{e}");
        let e = bad("\n\npriority = 16\n");
        assert_eq!((e.line, e.column), (3, 12), "{e}");
        assert!(
            e.reason.contains("priority = 16") && e.reason.contains("0-15"),
            "{e}"
        );
        let e = bad("sm_assigned_guid = 256\n");
        assert!(e.reason.contains("0-255"), "{e}");
        let e = bad("lash_start_vl = 15\n");
        assert!(e.reason.contains("0-14"), "{e}");
        let e = bad("lmc = 8\n");
        assert!(
            e.reason.contains("lmc = 8") && e.reason.contains("0-7"),
            "{e}"
        );
        for (text, why) in [
            ("routing = \"torus-2QoS\"\n", "minhop"),
            ("part_enforce = \"Both\"\n", "both, in, out or off"),
            ("sm_key = -1\n", "negative"),
            ("sm_key = \"12\"\n", "0x"),
            ("poll_ms = 1\n", "10-3600000"),
            ("poll_retries = 1001\n", "0-1000"),
            ("lid_policy = \"static\"\n", "prepopulated"),
            ("retries = 21\n", "0-20"),
            ("max_wire_smps = -1\n", "0-2147483647"),
            ("log_max_size = 1048577\n", "0-1048576"),
            ("force_link_width = 32\n", "not 0-31 or 255"),
            ("force_link_speed = 8\n", "not 0-7 or 15"),
            ("force_link_speed_ext = 29\n", "not 0-15 or 30 or 31"),
            ("max_wire_smps = 2147483648\n", "0-2147483647"),
            ("timeout_ms = 5\n", "10-10000"),
            ("log_level = \"loud\"\n", "warn"),
            ("m_key_protection_level = 4\n", "0-3"),
            ("m_key_lease_period = 65536\n", "0-65535"),
            ("sweep_ms = -1\n", "0-86400000"),
            ("max_op_vls = 0\n", "1-5"),
            ("vl_stall_count = 8\n", "0-7"),
            ("leaf_head_of_queue_lifetime = 32\n", "0-31"),
            ("overrun_errors_threshold = 16\n", "0-15"),
            ("ready_timeout_s = 0\n", "1-86400"),
        ] {
            let e = bad(text);
            assert!(e.reason.contains(why), "{text:?}: {e}");
        }
        let e = bad("priority = \"high\"\n");
        assert_eq!(e.line, 1, "{e}");
        let e = bad("priority = \n");
        assert_eq!(e.line, 1, "{e}");
        let e = bad("qos = 1\n");
        assert_eq!(e.line, 1, "{e}");
    }
}
