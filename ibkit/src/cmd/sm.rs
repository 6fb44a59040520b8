//! `ibkit sm`: ibkit's subnet manager on a real MAD stack ([`smd`]:
//! `smi::sm` over a umad port of a CA, or as the SM client of an
//! ibsim-protocol simulator). On real hardware that is a real subnet;
//! under ibsim it is the simulated fabric, through the simulator's socket
//! or through the `libumad2sim.so` preload as OpenSM is tested.

use super::args::{parse_fallback_engine, parse_sm_engine};
use smi::sm::Engine;

/// Options of `ibkit sm`.
#[derive(Clone, Debug, clap::Args)]
pub struct SmArgs {
    /// How to reach the fabric: `umad` (a umad port: an HCA, or ibsim
    /// through libumad2sim), `ibsim` (an ibsim-protocol simulator's socket
    /// directly, attached as the node's SM: Debian's ibsim or `ibkit
    /// fabric serve`), or `auto`: ibsim when IBSIM_SOCKNAME is set, else
    /// umad. libumad2sim damages the last 32 bytes of every MAD it
    /// delivers, SA Sets among them.
    #[arg(long, default_value = "auto", value_parser = ["auto", "umad", "ibsim"])]
    pub transport: String,
    /// With the ibsim transport: the node to attach at (default: SIM_HOST, else the simulator's first CA).
    #[arg(long)]
    pub sim_host: Option<String>,
    /// Write every MAD the SM sends and receives (SMPs, SA queries and
    /// answers, RMPP segments) to this LINKTYPE_INFINIBAND pcap file.
    #[arg(long)]
    pub pcap: Option<std::path::PathBuf>,
    /// CA name (default: the first).
    #[arg(long)]
    pub ca: Option<String>,
    /// Port number (0: the first active).
    #[arg(long, default_value_t = 0)]
    pub port: u8,
    /// The port to run on, by its GUID (as OpenSM's -g, guid), among
    /// every CA's ports; instead of --ca and --port.
    #[arg(long, short = 'g', value_parser = super::args::parse_u64, conflicts_with_all = ["ca", "port"])]
    pub guid: Option<u64>,
    /// OpenSM's partition configuration (partitions.conf syntax) to
    /// apply: P_Key tables written where they differ, enforcement on the
    /// switch ports cabled to CAs, the SA answering within partitions.
    /// SIGHUP re-reads it; a broken file keeps the partitions in force.
    #[arg(long)]
    pub partitions: Option<std::path::PathBuf>,
    /// Apply QoS with OpenSM's default qos_* settings: SL-to-VL and VL
    /// arbitration tables on every port (as opensm -Q).
    #[arg(long)]
    pub qos: bool,
    /// An opensm.conf whose qos_* options (qos_max_vls, qos_high_limit,
    /// qos_vlarb_high/low, qos_sl2vl and their qos_ca_/qos_swe_/qos_sw0_/
    /// qos_rtr_ forms) give the QoS policy; implies --qos. Other options
    /// in the file are skipped. SIGHUP re-reads it.
    #[arg(long, value_name = "FILE")]
    pub qos_config: Option<std::path::PathBuf>,
    /// OpenSM's qos-policy.conf: its port-groups, qos-levels and
    /// qos-match-rules, and its qos-ulps (default, sdp, rds, iser, ipoib,
    /// srp, any), give PathRecords their SL, MTU and rate limits, packet
    /// lifetime and P_Key; qos-setup is skipped, as OpenSM skips it.
    /// SIGHUP re-reads it.
    #[arg(long, value_name = "FILE")]
    pub qos_policy: Option<std::path::PathBuf>,
    /// A TOML file with the SM's settings (priority, sm_key, sa_key,
    /// m_key, m_key_protection_level, m_key_lease_period, m_key_lookup, m_key_per_port, poll_ms, poll_retries, timeout_ms, retries, long_timeout_ms, max_wire_smps, max_wire_smps2, max_smps_timeout,
    /// subnet_timeout, head_of_queue_lifetime, leaf_head_of_queue_lifetime,
    /// vl_stall_count, leaf_vl_stall_count, max_op_vls,
    /// local_phy_errors_threshold, overrun_errors_threshold,
    /// packet_life_time, sm_sl, force_link_width, force_link_speed,
    /// force_link_speed_ext, sweep_ms, force_heavy_sweep, routing, partitions, qos, qos_config, qos_policy,
    /// log_level, log_file, accum_log_file, log_max_size, log_prefix, dump_dir, cache_dir, sa_db_file, sa_db_dump_dir, subnet_lst_dir, vm_socket, reassign_lids,
    /// lmc, lmc_esp0, connect_roots, lash_start_vl, no_clients_rereg, subnet_prefix, root_guid_file, lfts_file, guid_routing_order_file, guid_routing_order_no_scatter, hop_weights_file, port_search_ordering_file, port_shifting, scatter_ports, port_profile_switch_nodes, port_prof_ignore_file, lmc_as_opensm, node_name_map, fsync_high_avail_files, part_enforce, allow_both_pkeys, keep_pkey_indexes, honor_guid2lid_file,
    /// sweep_on_trap, ignore_other_sm, sm_inactive, disable_multicast, use_mfttop, babbling_port_policy, use_optimized_slvl, drop_event_subscriptions, mcgroup_join_validation,
    /// ipoib_mcgroup_creation_validation, consolidate_ipv6_snm_req, use_original_extended_sa_rates_only, max_rate_enum, ready_timeout_s; paths relative to the file). A flag given here wins over the file; an unknown key or a
    /// bad value is refused with its line. SIGHUP reads it again.
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// OpenSM's own opensm.conf (as `opensm -F`, or as `opensm -c`
    /// writes it), instead of --config: what ibkit has an equivalent for
    /// is applied (guid, sm_priority, sm_key, sa_key, m_key,
    /// m_key_protection_level, m_key_lease_period, m_key_lookup, m_key_per_port, the link parameters
    /// (subnet_timeout, head_of_queue_lifetime and its leaf_,
    /// vl_stall_count and its leaf_, max_op_vls, the error thresholds,
    /// packet_life_time, sm_sl, force_link_width, force_link_speed,
    /// force_link_speed_ext),
    /// lmc, lmc_esp0, connect_roots, lash_start_vl, no_clients_rereg, subnet_prefix, root_guid_file, lfts_file, guid_routing_order_file, guid_routing_order_no_scatter, hop_weights_file, port_search_ordering_file, port_shifting, scatter_ports, port_profile_switch_nodes, port_prof_ignore_file, node_name_map_name, fsync_high_avail_files,
    /// part_enforce, no_partition_enforcement, allow_both_pkeys, keep_pkey_indexes, sweep_on_trap, ignore_other_sm,
    /// sm_inactive, disable_multicast, use_mfttop, babbling_port_policy, use_optimized_slvl, drop_event_subscriptions, mcgroup_join_validation,
    /// ipoib_mcgroup_creation_validation, consolidate_ipv6_snm_req, use_original_extended_sa_rates_only, max_rate_enum, honor_guid2lid_file,
    /// reassign_lids, sweep_interval, sminfo_polling_timeout, polling_retry_number,
    /// transaction_timeout/retries, long_transaction_timeout, max_wire_smps, max_wire_smps2, max_smps_timeout, routing_engine, partition_config_file,
    /// qos with the file's qos_* options, qos_policy_file, log_file,
    /// accum_log_file, log_max_size, log_prefix, force_log_flush (always so),
    /// log_flags, dump_files_dir, sa_db_file, sm_assigned_guid); the rest
    /// is logged as not applied, with a warning where it changes the
    /// subnet. SIGHUP reads it again.
    #[arg(long, value_name = "FILE", conflicts_with = "config")]
    pub opensm_config: Option<std::path::PathBuf>,
    /// Append the log to this file (with times) instead of standard error;
    /// SIGUSR1 opens it again by its name (for logrotate).
    #[arg(long, value_name = "FILE")]
    pub log_file: Option<std::path::PathBuf>,
    /// Empty the log file at the start instead of appending to it
    /// (OpenSM's -e; accum_log_file false in the files).
    #[arg(long)]
    pub erase_log_file: bool,
    /// Empty the log file before a line once it holds more than this many
    /// MiB (OpenSM's -L and log_max_size) [default: 0, no limit].
    #[arg(long, value_name = "MB", value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    pub log_limit: Option<u32>,
    /// Write this and ": " before the message of every log line, to tell
    /// this SM's lines from another's where they meet (OpenSM's
    /// --log_prefix and log_prefix; 1-64 printable characters). Read at
    /// the start.
    #[arg(long, value_name = "TEXT", value_parser = smd::config::log_prefix)]
    pub log_prefix: Option<String>,
    /// Write OpenSM's dumps here each time the subnet comes up or
    /// changes: opensm-subnet.lst, opensm-lfts.dump, opensm.fdbs,
    /// opensm-lid-matrix.dump, opensm.mcfdbs, with QoS
    /// opensm-sl2vl.dump, routing updn opensm-updn-roots.dump and routing
    /// ftree opensm-ftree-ca-order.dump; and the
    /// SA's opensm-sa.dump (groups, services, subscriptions) when it
    /// changes, at most once a second, and at the stop.
    #[arg(long, value_name = "DIR")]
    pub dump_dir: Option<std::path::PathBuf>,
    /// Keep the LID cache here (guid2lid, OpenSM's layout) and the keys
    /// the ports hold (guid2mkey, OpenSM's, mode 0600): read at start, so
    /// that ports get the LIDs they had and can be reached under an old
    /// M_Key, and written each time the subnet comes up or changes.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<std::path::PathBuf>,
    /// Restore the SA's multicast groups (MGIDs, MLIDs, members),
    /// services and subscriptions from this database in OpenSM's layout
    /// (opensm-sa.dump, as OpenSM's -S) once the subnet is first up. A
    /// file that cannot be read is logged and the SA starts empty. With
    /// --dump-dir the SA writes its own opensm-sa.dump there.
    #[arg(long, value_name = "FILE")]
    pub sa_db: Option<std::path::PathBuf>,
    /// Starting as master, number every port afresh (as OpenSM's -r,
    /// reassign_lids). Without it a port keeps the LID it holds (unless
    /// --cache-dir's guid2lid gives that LID to another port), so an SM
    /// started again on a running subnet changes no LID and keeps the
    /// VMs of vSwitch hypervisors.
    #[arg(long)]
    pub reassign_lids: bool,
    /// LID Mask Control, 0–7 (as OpenSM's -l, lmc): every CA port gets
    /// 2^LMC aligned LIDs, each routed on its own (spread over the
    /// equal-cost links), and the SA lists a pair's paths at every pair of
    /// their LIDs. A switch's port 0 keeps one LID.
    #[arg(long, short = 'l', value_name = "LMC", value_parser = clap::value_parser!(u8).range(0..=7))]
    pub lmc: Option<u8>,
    /// A switch whose port 0 is enhanced gets 2^LMC LIDs too, every one
    /// routed to it (OpenSM's lmc_esp0); base ports 0 keep one LID.
    #[arg(long)]
    pub lmc_esp0: bool,
    /// Up*/down* routes the roots' own LIDs by min-hop from every switch,
    /// so the roots reach each other (OpenSM's connect_roots, -z; where
    /// the roots were found, or more than one named). Without it those
    /// LIDs are routed up*/down*, and by min-hop only from switches
    /// up*/down* leaves without a way (OpenSM leaves them unreachable).
    #[arg(long, short = 'z')]
    pub connect_roots: bool,
    /// The SL and VL of LASH's first layer, 0–14 (OpenSM's
    /// --lash_start_vl): layer k is SL start + k, and the VLs below it
    /// are left to other traffic [default: 0].
    #[arg(long, value_name = "VL", value_parser = clap::value_parser!(u8).range(0..=14))]
    pub lash_start_vl: Option<u8>,
    /// Never ask the hosts' SA clients to reregister (OpenSM's
    /// no_clients_rereg). By default the SM sets PortInfo's
    /// ClientReregister on every end port as it brings the subnet up or
    /// takes it over, and on a port new, back, or naming another master,
    /// so that hosts join their multicast groups again with this SM.
    #[arg(long)]
    pub no_clients_rereg: bool,
    /// The switches up*/down* and fat-tree routing start from: a node
    /// GUID a line, as OpenSM's root_guid_file (-a); a GUID no switch has
    /// is skipped, and with none found the engine picks the roots.
    #[arg(long, value_name = "FILE")]
    pub root_guid_file: Option<std::path::PathBuf>,
    /// The switches' forwarding tables for `--routing file`, in the layout
    /// of OpenSM's opensm-lfts.dump (which OpenSM and ibkit write), as
    /// OpenSM's lfts_file (-U): each route moved to its owner's LID now,
    /// a switch the file does not name left with an empty table; a file
    /// that names a port a switch lacks makes the SM route min-hop.
    #[arg(long, value_name = "FILE")]
    pub lfts_file: Option<std::path::PathBuf>,
    /// Route these ports first, a port GUID a line (OpenSM's
    /// guid_routing_order_file, -X): min-hop and up*/down* spread them
    /// evenly over every switch's equal-cost ports before any other; a
    /// GUID no port has is skipped. Read again on SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub guid_routing_order_file: Option<std::path::PathBuf>,
    /// With --scatter-ports, never scatter the ports of
    /// --guid-routing-order-file (OpenSM's guid_routing_order_no_scatter).
    #[arg(long)]
    pub guid_routing_order_no_scatter: bool,
    /// Weigh min-hop's hops, `SWITCH_GUID PORT WEIGHT` a line (OpenSM's
    /// hop_weights_file, -w): a hop out of that port weighs 1-255, every
    /// other 1, and routes take the lightest paths, so a site steers them
    /// off a link. Read again on SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub hop_weights_file: Option<std::path::PathBuf>,
    /// The order each named switch tries its ports in, `SWITCH_GUID
    /// PORT...` a line, the rest after in ascending order (OpenSM's
    /// port_search_ordering_file, -O): among equally used ports on a best
    /// path, the first in this order takes the route (min-hop and
    /// up*/down*). Read again on SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub port_search_ordering_file: Option<std::path::PathBuf>,
    /// Start each switch's search among its best ports where their mean
    /// load points, so consecutive LIDs do not line up on the same ports
    /// (OpenSM's --port-shifting; min-hop and up*/down*).
    #[arg(long)]
    pub port_shifting: bool,
    /// Pick at random among a switch's least used best ports, from this
    /// seed, the same at every routing (OpenSM's --scatter-ports; 0: off;
    /// min-hop and up*/down*, base LIDs).
    #[arg(long, value_name = "SEED")]
    pub scatter_ports: Option<u32>,
    /// Count routes to switches' own LIDs in a port's load (OpenSM's
    /// port_profile_switch_nodes; min-hop and up*/down*); without it only
    /// routes to end ports count, as OpenSM's default.
    #[arg(long)]
    pub port_profile_switch_nodes: bool,
    /// Under LMC, route the LIDs above a port's base as OpenSM's min-hop
    /// and up*/down* do (each switch sends them towards systems the
    /// port's other LIDs do not reach yet), so the tables are OpenSM's.
    /// Without it each takes its base's port turned by a digit of its
    /// offset per level, which gives a pair of ports more distinct paths.
    /// (`--routing dor` follows OpenSM's dor under LMC either way.)
    #[arg(long)]
    pub lmc_as_opensm: bool,
    /// Ports whose routes never count in their load (min-hop and
    /// up*/down*),
    /// `SWITCH_GUID PORT` a line (OpenSM's port_prof_ignore_file). Read
    /// again on SIGHUP.
    #[arg(long, value_name = "FILE")]
    pub port_prof_ignore_file: Option<std::path::PathBuf>,
    /// Name nodes in the dumps by this node name map (`GUID "name"` a
    /// line, as infiniband-diags' --node-name-map and OpenSM's
    /// node_name_map_name); a node it does not name keeps its
    /// NodeDescription. A line that is no GUID is refused with its place
    #[arg(long, value_name = "FILE")]
    pub node_name_map: Option<std::path::PathBuf>,
    /// Partition enforcement on the switch ports cabled to CAs, with
    /// --partitions (OpenSM's part_enforce): both, in (packets from the
    /// CA checked), out (packets to it), or off (the switch ports' P_Key
    /// tables are not written either) [default: both].
    #[arg(long, value_name = "MODE", value_parser = super::args::parse_part_enforce)]
    pub part_enforce: Option<smi::sm::PartEnforce>,
    /// A port --partitions names `both` holds the partition's full and
    /// limited P_Keys (OpenSM's allow_both_pkeys, its -W); without it
    /// `both` is taken as full, as OpenSM takes it.
    #[arg(long)]
    pub allow_both_pkeys: bool,
    /// Traps start no sweep (OpenSM's sweep_on_trap FALSE): a trap 128
    /// is still repressed, and the change it reports waits for the
    /// periodic sweep (none with --sweep-ms 0).
    #[arg(long)]
    pub no_sweep_on_trap: bool,
    /// Disable a port that sends the same trap 129, 130 or 131 (link
    /// integrity, buffer overrun, flow-control watchdog) 250 times in a
    /// row, as OpenSM's babbling_port_policy; without it such a port is
    /// only routed around (from its 11th trap, until a quiet minute).
    #[arg(long)]
    pub babbling_port_policy: bool,
    /// Take no part in the election (OpenSM's ignore_other_sm, its -d0):
    /// ask no other SM for its SMInfo and become master whatever SMs are
    /// there. For a subnet with one SM.
    #[arg(long)]
    pub ignore_other_sm: bool,
    /// Start NOT ACTIVE (OpenSM's --inactive, -I, sm_inactive): send
    /// nothing and answer other SMs' SMInfo requests as NOT ACTIVE, so
    /// their elections pass this SM over, until a master's
    /// SubnSet(SMInfo, Discover) makes it take part.
    #[arg(long, short = 'I')]
    pub inactive: bool,
    /// No multicast forwarding (OpenSM's disable_multicast, its -d3): the SA
    /// keeps the groups hosts join, but no switch's multicast table is
    /// written, and its ClassPortInfo leaves IsUDMulticastSupported out.
    #[arg(long)]
    pub disable_multicast: bool,
    /// IPv6 solicited-node multicast groups (IPoIB's
    /// ff1s:601b:PKEY::1:ffxx:xxxx, one an IPv6 address) of a partition
    /// and scope share one MLID (OpenSM's consolidate_ipv6_snm_req), so
    /// that IPv6 hosts do not spend the subnet's MLIDs.
    #[arg(long)]
    pub consolidate_ipv6_snm_req: bool,
    /// The SA answers rates no later than the original extended ones,
    /// 300 Gb/s (12x EDR) at most, for hosts whose stacks do not know the
    /// 2x, HDR and NDR rate codes (OpenSM's
    /// use_original_extended_sa_rates_only).
    #[arg(long)]
    pub use_original_extended_sa_rates_only: bool,
    /// The highest rate code the SA answers, 2-24 (OpenSM 3.3.24's
    /// max_rate_enum; 63, the default, for no limit): a rate above it steps
    /// down to one an older stack knows (18: 300 Gb/s, as
    /// --use-original-extended-sa-rates-only).
    #[arg(long, value_name = "CODE", value_parser = parse_rate_enum)]
    pub max_rate_enum: Option<u8>,
    /// Taking the subnet over from another master, read the guid2lid of
    /// --cache-dir again and give its LIDs as at a fresh start (OpenSM's
    /// honor_guid2lid_file, its --honor_guid2lid); without it the LIDs
    /// the ports hold win, as OpenSM's default.
    #[arg(long)]
    pub honor_guid2lid_file: bool,
    /// Take VM requests on this Unix socket (mode 0600; the SM's user
    /// and root): `ibkit vm --socket PATH create|migrate|destroy|list`
    /// starts, live-migrates (LID and vGUID kept, LFT entries swapped or
    /// copied), stops and lists the VMs of vSwitch hypervisors.
    #[arg(long, value_name = "PATH")]
    pub vm_socket: Option<std::path::PathBuf>,
    /// Stop once the subnet is up (or once this SM stands by for another
    /// master).
    #[arg(long)]
    pub once: bool,
    /// Election priority, 0–15 (as OpenSM's -p): the highest SM is
    /// master, the others stand by and poll it; between equals, the lower
    /// port GUID.
    /// [default: 0]
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=15))]
    pub priority: Option<u8>,
    /// SM_Key (as OpenSM's sm_key, whose default is 1): an SM with another
    /// non-zero key is ignored, and a SubnSet(SMInfo) must carry it.
    /// [default: 1]
    #[arg(long, value_parser = super::args::parse_u64)]
    pub sm_key: Option<u64>,
    /// The SA key (as OpenSM's sa_key, whose default is 1): a host whose
    /// SA request carries it is trusted (it sees P_Key tables and group
    /// members); a request with another non-zero key is dropped.
    /// [default: 1]
    #[arg(long, value_parser = super::args::parse_u64)]
    pub sa_key: Option<u64>,
    /// Milliseconds between a standby's polls of its master's SMInfo: a
    /// master that stops answering is detected within this plus 800 ms
    /// (four tries of 200 ms: `timeout_ms` and `retries` in --config).
    /// [default: 500]
    #[arg(long, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub poll_ms: Option<u64>,
    /// Polls of the master a standby lets go unanswered in a row, each
    /// after its retransmissions, before it takes over (OpenSM's
    /// polling_retry_number) [default: 0: at the first].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=1_000))]
    pub poll_retries: Option<u32>,
    /// SMPs in flight at once, 0 for no limit (OpenSM's max_wire_smps,
    /// its -n; OpenSM's default is 4) [default: 16].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=0x7FFF_FFFF))]
    pub max_wire_smps: Option<u32>,
    /// Routing engine: minhop, updn, ftree, file (the tables of
    /// --lfts-file, as OpenSM's file engine), dor (dimension order, for
    /// meshes and hypercubes, as OpenSM's) or lash (layered shortest
    /// paths, as OpenSM's: min-hop's routes, an SL for each pair of
    /// switches so that none can deadlock; with --qos, whose SL-to-VL
    /// tables give each SL its own VL) [default: minhop].
    #[arg(long, value_parser = parse_sm_engine)]
    pub routing: Option<Engine>,
    /// With --routing file, the engine where the file does not fit the
    /// fabric: minhop, updn, ftree, dor or lash (OpenSM's next engine in
    /// routing_engine, as in file,updn) [default: minhop].
    #[arg(long, value_name = "ENGINE", value_parser = parse_fallback_engine)]
    pub file_fallback: Option<Engine>,
    /// LID policy for hypervisors' VFs (vSwitch): prepopulated (every VF
    /// a LID at bring-up) or dynamic (a LID when a VM starts)
    /// [default: prepopulated].
    #[arg(long, value_parser = super::args::parse_policy)]
    pub lid_policy: Option<smi::sm::LidPolicy>,
    /// Milliseconds between light sweeps (without --once); 0: none, a
    /// trap or SIGHUP still starts one (OpenSM's sweep_interval 0)
    /// [default: 10000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=86_400_000))]
    pub sweep_ms: Option<u64>,
    /// One JSON object at the end.
    #[arg(long)]
    pub json: bool,
    /// Log every SMP sent and received and every phase (the log's debug level; RUST_LOG chooses others).
    #[arg(long)]
    pub verbose: bool,
}

/// Runs `ibkit sm`.
pub fn run(a: &SmArgs) -> super::Outcome {
    // The configuration file first: a broken one is refused before
    // anything else happens.
    let (file, notes) = match (&a.config, &a.opensm_config) {
        (Some(p), _) => (smd::config::read_sm_file(p)?, Vec::new()),
        (None, Some(p)) => {
            let c = smd::opensm_conf::read_opensm_conf(p)?;
            (c.settings, c.notes)
        }
        (None, None) => Default::default(),
    };
    // With --json, stderr stays quiet unless RUST_LOG asks.
    let level = if a.verbose {
        "debug"
    } else if a.json {
        "warn"
    } else {
        file.log_level.as_deref().unwrap_or("info")
    };
    let log_file = a.log_file.clone().or(file.log_file.clone());
    let limits = LogLimits {
        accumulate: !a.erase_log_file && file.accum_log_file != Some(false),
        max_bytes: u64::from(a.log_limit.or(file.log_max_size).unwrap_or(0)) << 20,
    };
    let prefix = a.log_prefix.clone().or(file.log_prefix.clone());
    let set_log_level = init_sm_logging(level, log_file.as_deref(), limits, prefix)?;
    if let Some(p) = &a.opensm_config {
        smd::log_opensm_notes(p, &notes);
    }
    let via =
        if let Some((socket, node)) = super::args::simulator(&a.transport, a.sim_host.as_deref()) {
            smd::Via::Sim {
                socket,
                node,
                guid: a.guid.or(file.guid),
            }
        } else {
            smd::Via::Umad {
                ca: a.ca.clone(),
                port: a.port,
                guid: a.guid.or(file.guid),
            }
        };
    // SIGTERM and SIGINT end a running SM cleanly: it stops at its next
    // turn and reports what it did.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
    }
    // SIGHUP re-reads the configuration, partition and QoS files and
    // starts a heavy sweep (as OpenSM).
    let reload = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
        .map_err(|e| format!("cannot handle SIGHUP: {e}"))?;
    let link = file.link_params();
    let port_selection = smd::port_selection_of(&flags(a), &file);
    let r = smd::run(
        &smd::SmdConfig {
            via,
            once: a.once,
            routing: a.routing.or(file.routing).unwrap_or(Engine::MinHop),
            file_fallback: a
                .file_fallback
                .or(file.file_fallback)
                .unwrap_or(Engine::MinHop),
            lid_policy: (a.lid_policy.or(file.lid_policy))
                .unwrap_or(smi::sm::LidPolicy::Prepopulated),
            timeout_ms: file.timeout_ms.unwrap_or(200),
            long_timeout_ms: file.long_timeout_ms.unwrap_or(500),
            retries: file.retries.unwrap_or(3),
            window: smd::window(a.max_wire_smps.or(file.max_wire_smps)),
            window2: file.max_wire_smps2.map_or(0, |w| w as usize),
            stuck_ms: smd::stuck_ms(file.max_smps_timeout),
            sweep_ms: a.sweep_ms.or(file.sweep_ms).unwrap_or(10_000),
            pcap: a.pcap.clone(),
            partitions: a.partitions.clone().or(file.partitions),
            qos: a.qos || file.qos == Some(true),
            qos_config: a.qos_config.clone().or(file.qos_config),
            qos_policy: a.qos_policy.clone().or(file.qos_policy),
            reload: Some(reload),
            priority: a.priority.or(file.priority).unwrap_or(0),
            sm_key: a.sm_key.or(file.sm_key).unwrap_or(1),
            sa_key: a.sa_key.or(file.sa_key).unwrap_or(1),
            m_key: file.m_key.unwrap_or(0),
            m_key_protect_bits: file.m_key_protection_level.unwrap_or(0),
            m_key_lease_period: file.m_key_lease_period.unwrap_or(0),
            m_key_lookup: file.m_key_lookup.unwrap_or(true),
            m_key_per_port: file.m_key_per_port == Some(true),
            subnet_timeout: file.subnet_timeout.unwrap_or(18),
            link,
            assigned_guid_byte: file.sm_assigned_guid.unwrap_or(0),
            poll_ms: a.poll_ms.or(file.poll_ms).unwrap_or(500),
            poll_retries: a.poll_retries.or(file.poll_retries).unwrap_or(0),
            dump_dir: a.dump_dir.clone().or(file.dump_dir),
            sa_db_dump_dir: file.sa_db_dump_dir,
            subnet_lst_dir: file.subnet_lst_dir,
            cache_dir: a.cache_dir.clone().or(file.cache_dir),
            sa_db_file: a.sa_db.clone().or(file.sa_db_file),
            reassign_lids: a.reassign_lids || file.reassign_lids == Some(true),
            lmc: a.lmc.or(file.lmc).unwrap_or(0),
            lmc_esp0: a.lmc_esp0 || file.lmc_esp0 == Some(true),
            connect_roots: a.connect_roots || file.connect_roots == Some(true),
            lash_start_vl: a.lash_start_vl.or(file.lash_start_vl).unwrap_or(0),
            no_clients_rereg: a.no_clients_rereg || file.no_clients_rereg == Some(true),
            subnet_prefix: (file.subnet_prefix).unwrap_or(mad_core::Gid::DEFAULT_PREFIX),
            root_guid_file: a.root_guid_file.clone().or(file.root_guid_file),
            lfts_file: a.lfts_file.clone().or(file.lfts_file),
            guid_routing_order_file: (a.guid_routing_order_file.clone())
                .or(file.guid_routing_order_file),
            port_selection,
            node_name_map: a.node_name_map.clone().or(file.node_name_map),
            fsync_high_avail_files: file.fsync_high_avail_files != Some(false),
            part_enforce: a.part_enforce.or(file.part_enforce).unwrap_or_default(),
            allow_both_pkeys: a.allow_both_pkeys || file.allow_both_pkeys == Some(true),
            keep_pkey_indexes: file.keep_pkey_indexes != Some(false),
            honor_guid2lid_file: a.honor_guid2lid_file || file.honor_guid2lid_file == Some(true),
            sweep_on_trap: !a.no_sweep_on_trap && file.sweep_on_trap != Some(false),
            babbling_port_policy: a.babbling_port_policy || file.babbling_port_policy == Some(true),
            ignore_other_sm: a.ignore_other_sm || file.ignore_other_sm == Some(true),
            sm_inactive: a.inactive || file.sm_inactive == Some(true),
            disable_multicast: a.disable_multicast || file.disable_multicast == Some(true),
            mcgroup_join_validation: file.mcgroup_join_validation != Some(false),
            use_mfttop: file.use_mfttop != Some(false),
            use_optimized_slvl: file.use_optimized_slvl != Some(false),
            drop_event_subscriptions: file.drop_event_subscriptions == Some(true),
            ipoib_mcgroup_creation_validation: file.ipoib_mcgroup_creation_validation
                != Some(false),
            consolidate_ipv6_snm_req: a.consolidate_ipv6_snm_req
                || file.consolidate_ipv6_snm_req == Some(true),
            use_original_extended_sa_rates_only: a.use_original_extended_sa_rates_only
                || file.use_original_extended_sa_rates_only == Some(true),
            max_rate_enum: (a.max_rate_enum.or(file.max_rate_enum)).unwrap_or(smd::NO_RATE_LIMIT),
            force_heavy_sweep: file.force_heavy_sweep == Some(true),
            vm_socket: a.vm_socket.clone().or(file.vm_socket),
            ready_timeout_ms: file
                .ready_timeout_s
                .map_or(smd::notify::READY_AT_THE_LATEST, |s| s * 1000),
            reconfig: a
                .config
                .clone()
                .or(a.opensm_config.clone())
                .map(|f| smd::Reconfig {
                    file: f,
                    opensm: a.opensm_config.is_some(),
                    flags: flags(a),
                    log_file,
                    set_log_level: Some(set_log_level),
                }),
            ..smd::SmdConfig::default()
        },
        &stop,
    )?;
    // A standby (or disabled) SM did its job without bringing anything up.
    let standing_by = !r.up && matches!(r.sm_state.as_str(), "STANDBY" | "NOT ACTIVE");
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else if standing_by {
        println!(
            "SM state {}: another SM is master; {} nodes seen, {} SMPs sent",
            r.sm_state, r.nodes, r.smps
        );
    } else {
        println!(
            "subnet up: {} nodes ({} switches), LIDs 1..={}, {} SMPs ({} retransmitted), {:.1} ms; SM state {}",
            r.nodes, r.switches, r.lids, r.smps, r.retries, r.up_ms, r.sm_state
        );
    }
    super::check(r.up || standing_by, || {
        format!(
            "the subnet did not come up: {} nodes found, {} SMPs sent",
            r.nodes, r.smps
        )
    })
}

/// What the command line set, as a configuration file would: on SIGHUP
/// these still win over the file read again.
fn flags(a: &SmArgs) -> smd::config::SmFile {
    smd::config::SmFile {
        priority: a.priority,
        sm_key: a.sm_key,
        sa_key: a.sa_key,
        poll_ms: a.poll_ms,
        poll_retries: a.poll_retries,
        max_wire_smps: a.max_wire_smps,
        sweep_ms: a.sweep_ms,
        routing: a.routing,
        file_fallback: a.file_fallback,
        lid_policy: a.lid_policy,
        timeout_ms: None,
        retries: None,
        partitions: a.partitions.clone(),
        qos: a.qos.then_some(true),
        qos_config: a.qos_config.clone(),
        qos_policy: a.qos_policy.clone(),
        log_level: a.verbose.then(|| "debug".to_string()),
        log_file: a.log_file.clone(),
        dump_dir: a.dump_dir.clone(),
        cache_dir: a.cache_dir.clone(),
        sa_db_file: a.sa_db.clone(),
        vm_socket: a.vm_socket.clone(),
        reassign_lids: a.reassign_lids.then_some(true),
        lmc: a.lmc,
        lmc_esp0: a.lmc_esp0.then_some(true),
        connect_roots: a.connect_roots.then_some(true),
        lash_start_vl: a.lash_start_vl,
        no_clients_rereg: a.no_clients_rereg.then_some(true),
        root_guid_file: a.root_guid_file.clone(),
        lfts_file: a.lfts_file.clone(),
        guid_routing_order_file: a.guid_routing_order_file.clone(),
        guid_routing_order_no_scatter: a.guid_routing_order_no_scatter.then_some(true),
        hop_weights_file: a.hop_weights_file.clone(),
        port_search_ordering_file: a.port_search_ordering_file.clone(),
        port_shifting: a.port_shifting.then_some(true),
        scatter_ports: a.scatter_ports,
        port_profile_switch_nodes: a.port_profile_switch_nodes.then_some(true),
        lmc_as_opensm: a.lmc_as_opensm.then_some(true),
        port_prof_ignore_file: a.port_prof_ignore_file.clone(),
        node_name_map: a.node_name_map.clone(),
        part_enforce: a.part_enforce,
        allow_both_pkeys: a.allow_both_pkeys.then_some(true),
        sweep_on_trap: a.no_sweep_on_trap.then_some(false),
        babbling_port_policy: a.babbling_port_policy.then_some(true),
        ignore_other_sm: a.ignore_other_sm.then_some(true),
        sm_inactive: a.inactive.then_some(true),
        disable_multicast: a.disable_multicast.then_some(true),
        consolidate_ipv6_snm_req: a.consolidate_ipv6_snm_req.then_some(true),
        use_original_extended_sa_rates_only: a.use_original_extended_sa_rates_only.then_some(true),
        max_rate_enum: a.max_rate_enum,
        honor_guid2lid_file: a.honor_guid2lid_file.then_some(true),
        force_heavy_sweep: None,
        guid: a.guid,
        sm_assigned_guid: None,
        ..Default::default()
    }
}

/// The SM's log: `level` (RUST_LOG wins), on standard error, or appended
/// to `file` with times; the function returned changes the level.
///
/// SIGUSR1 opens `file` again by its name, as OpenSM's log is reopened
/// for logrotate: once the old file has been moved away, the lines that
/// follow go to a new file of that name. A file that cannot be opened
/// again is logged to the one still open. Without a file the signal is
/// logged and changes nothing (its default action would end the SM).
fn init_sm_logging(
    level: &str,
    file: Option<&std::path::Path>,
    limits: LogLimits,
    prefix: Option<String>,
) -> Result<smd::SetLogLevel, String> {
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::{fmt, reload, EnvFilter};
    let from_env = EnvFilter::try_from_default_env().ok();
    let pinned = from_env.is_some();
    let (filter, handle) = reload::Layer::new(from_env.unwrap_or_else(|| EnvFilter::new(level)));
    let registry = tracing_subscriber::registry().with(filter);
    let log = file.map(|f| LogFile::open(f, limits)).transpose()?;
    let _ = match (&log, prefix) {
        (Some(log), None) => {
            let layer = fmt::layer()
                .with_writer(log.clone())
                .with_ansi(false)
                .with_target(false);
            registry.with(layer).try_init()
        }
        (Some(log), Some(prefix)) => {
            let layer = fmt::layer()
                .with_writer(log.clone())
                .event_format(Prefixed { prefix, time: true });
            registry.with(layer).try_init()
        }
        (None, None) => {
            let layer = fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_target(false)
                .without_time();
            registry.with(layer).try_init()
        }
        (None, Some(prefix)) => {
            let layer = fmt::layer()
                .with_writer(std::io::stderr)
                .event_format(Prefixed {
                    prefix,
                    time: false,
                });
            registry.with(layer).try_init()
        }
    };
    let mut usr1 = signal_hook::iterator::Signals::new([signal_hook::consts::SIGUSR1])
        .map_err(|e| format!("cannot handle SIGUSR1: {e}"))?;
    std::thread::Builder::new()
        .name("log-reopen".into())
        .spawn(move || {
            for _ in usr1.forever() {
                match &log {
                    Some(l) => match l.reopen() {
                        Ok(()) => tracing::info!("SIGUSR1: log file {} reopened", l.path.display()),
                        Err(e) => tracing::warn!(
                            "SIGUSR1: log file {}: {e}; the log stays in the file already open",
                            l.path.display()
                        ),
                    },
                    None => tracing::info!("SIGUSR1: no log file to reopen"),
                }
            }
        })
        .map_err(|e| format!("cannot start the SIGUSR1 thread: {e}"))?;
    Ok(std::sync::Arc::new(move |l: &str| {
        if !pinned && handle.reload(EnvFilter::new(l)).is_ok() {
            tracing::info!("log level {l}");
        }
    }))
}

/// A log line with the site's prefix before its message (OpenSM's
/// `log_prefix`): its time (in a file), its level, `PREFIX: `, the
/// message and its fields; no colours.
struct Prefixed {
    prefix: String,
    time: bool,
}

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for Prefixed
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut w: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_subscriber::fmt::time::FormatTime;
        if self.time {
            tracing_subscriber::fmt::time::SystemTime.format_time(&mut w)?;
            write!(w, " ")?;
        }
        write!(w, "{:>5} {}: ", event.metadata().level(), self.prefix)?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// The SM's log file, appended to, that SIGUSR1 opens again by its name
/// ([`init_sm_logging`]); each line is written whole under its lock.
/// As OpenSM's log: emptied at the start unless accumulated
/// (`accum_log_file`), and emptied before a line once it holds more than
/// its limit (`log_max_size`).
#[derive(Clone)]
struct LogFile {
    path: std::path::PathBuf,
    file: std::sync::Arc<std::sync::Mutex<Held>>,
    /// Bytes the file may hold before it is emptied (0: no limit).
    max_bytes: u64,
}

/// The open log file and the bytes it holds.
struct Held {
    file: std::fs::File,
    bytes: u64,
}

impl Held {
    fn new(file: std::fs::File) -> Held {
        let bytes = file.metadata().map_or(0, |m| m.len());
        Held { file, bytes }
    }
}

/// How the log file is kept (OpenSM's `accum_log_file` and
/// `log_max_size`).
#[derive(Clone, Copy, Debug)]
struct LogLimits {
    /// Append to what the file holds (else empty it at the start).
    accumulate: bool,
    /// Empty the file before a line once it holds more than this many
    /// bytes (0: never).
    max_bytes: u64,
}

impl LogFile {
    fn open(path: &std::path::Path, limits: LogLimits) -> Result<LogFile, String> {
        let f = Self::append(path).map_err(|e| format!("log file {}: {e}", path.display()))?;
        if !limits.accumulate {
            f.set_len(0)
                .map_err(|e| format!("log file {}: cannot empty it: {e}", path.display()))?;
        }
        Ok(LogFile {
            path: path.to_path_buf(),
            file: std::sync::Arc::new(std::sync::Mutex::new(Held::new(f))),
            max_bytes: limits.max_bytes,
        })
    }

    fn append(path: &std::path::Path) -> std::io::Result<std::fs::File> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    }

    /// Opens the file by its name again and writes there from now on
    /// (the file open so far stays, unchanged, when that fails).
    fn reopen(&self) -> std::io::Result<()> {
        let f = Self::append(&self.path)?;
        *self.lock() = Held::new(f);
        Ok(())
    }

    /// The open file (a panic while another thread wrote a line leaves
    /// the file usable).
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One log line's writer: the file, locked while the line is written.
struct LogLine<'a>(std::sync::MutexGuard<'a, Held>);

impl std::io::Write for LogLine<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.0.file.write(buf)?;
        self.0.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.file.flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogFile {
    type Writer = LogLine<'a>;

    fn make_writer(&'a self) -> LogLine<'a> {
        let mut held = self.lock();
        // Over its limit, as OpenSM's log: emptied, the line written from
        // the start (the file is opened to append, so the next write goes
        // to the new end). Said on standard error, as OpenSM says it.
        if self.max_bytes != 0 && held.bytes > self.max_bytes {
            if held.file.set_len(0).is_ok() {
                eprintln!(
                    "ibkit sm: log file {} held more than {} bytes: emptied",
                    self.path.display(),
                    self.max_bytes
                );
            }
            held.bytes = 0;
        }
        LogLine(held)
    }
}

/// `--max-rate-enum`: 2-24, or 63 for no limit.
fn parse_rate_enum(v: &str) -> Result<u8, String> {
    match v.parse::<u8>() {
        Ok(x @ (2..=24 | 63)) => Ok(x),
        _ => Err(format!("{v:?}: not 2-24 or 63")),
    }
}
