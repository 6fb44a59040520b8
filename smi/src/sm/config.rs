//! Settings of the subnet manager and its routing engines.

use super::ucast::complete;
use super::*;

/// How min-hop and up*/down* choose their ports, as a site tunes
/// OpenSM's (the hop weights: min-hop only, as OpenSM's). A switch GUID
/// that names no live switch, a port the switch does not have, or a
/// search order that names a port twice is skipped (the whole line, for
/// an order), as OpenSM skips it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSelection {
    /// (switch node GUID, port, weight 1-255): the weight of a hop out of
    /// that port, where every other hop weighs 1 (OpenSM's
    /// `hop_weights_file`). Min-hop only, as OpenSM's.
    pub hop_weights: Vec<(u64, u8, u8)>,
    /// (switch node GUID, ports): the order the switch's ports are tried
    /// in, the ports not named after them in ascending order (OpenSM's
    /// `port_search_ordering_file`).
    pub search_order: Vec<(u64, Vec<u8>)>,
    /// OpenSM's `port_shifting` ([`routing::PortChoice::shifting`]).
    pub shifting: bool,
    /// OpenSM's `scatter_ports`: 0 off, else the seed
    /// ([`routing::PortChoice::scatter`]).
    pub scatter: u32,
    /// OpenSM's `guid_routing_order_no_scatter`: the ports of
    /// [`SmConfig::routing_order`] are never scattered.
    pub order_no_scatter: bool,
    /// OpenSM's `port_profile_switch_nodes`: routes to switches' own LIDs
    /// count in a port's load ([`routing::PortChoice::count_switch_lids`]).
    pub count_switch_lids: bool,
    /// (switch node GUID, port): ports whose routes never count in their
    /// load (OpenSM's `port_prof_ignore_file`).
    pub prof_ignore: Vec<(u64, u8)>,
    /// Under LMC, the LIDs above a port's base routed as OpenSM routes
    /// them ([`routing::PortChoice::lmc_as_opensm`]).
    pub lmc_as_opensm: bool,
}

/// Settings of a subnet manager.
#[derive(Clone, Debug)]
pub struct SmConfig {
    /// SMPs outstanding at once (1 reproduces OpenSM's controlled BFS).
    pub window: usize,
    /// The most SMPs outstanding once the window is stuck: each
    /// `stuck_ms` that passes with the window full and no response, it
    /// holds one more, up to this; back to `window` at the next response
    /// (OpenSM's `max_wire_smps2`). At or below `window`: never grows,
    /// the default.
    pub window2: usize,
    /// Milliseconds a full window waits for a response before it grows
    /// (OpenSM's `max_smps_timeout`, in µs there; 600 ms, its default).
    pub stuck_ms: u64,
    /// Milliseconds before an unanswered SMP is sent again.
    pub timeout_ms: u64,
    /// Milliseconds before an unanswered Set(SLtoVLMappingTable) with
    /// AllInputPorts or AllOutputPorts (optimized SL-to-VL programming,
    /// which a switch takes longer to apply) is sent again: OpenSM's
    /// `long_transaction_timeout`, 500 ms, its default. Below
    /// [`SmConfig::timeout_ms`], `timeout_ms` applies.
    pub long_timeout_ms: u64,
    /// Times an SMP is sent again before its target is given up.
    pub retries: u32,
    /// M_Key put in every SMP, and written (OpenSM's `m_key`) with
    /// [`SmConfig::m_key_protect_bits`] and [`SmConfig::m_key_lease_period`]
    /// to every end port (a CA's port, a switch's port 0) the SM sets.
    /// 0: no M_Key (IBA 14.2.4: a port whose M_Key is 0 checks nothing).
    pub m_key: MKey,
    /// M_KeyProtectBits written with the M_Key (0–3, OpenSM's
    /// `m_key_protection_level`; above 3 is taken as 3). 1: an SMP without
    /// the key may read (PortInfo's M_Key reads as 0) and may not write;
    /// 2 and 3: it may do neither. A port refused an SMP raises trap 256.
    pub m_key_protect_bits: u8,
    /// M_KeyLeasePeriod in seconds written with the M_Key (OpenSM's
    /// `m_key_lease_period`; 0: forever): how long a port keeps its
    /// protection after a refused SMP if no SMP with the key comes.
    pub m_key_lease_period: u16,
    /// Uses the M_Key each port is known to hold (OpenSM's `m_key_lookup`,
    /// on by default): read back from a port that shows it (its PortInfo
    /// with protect bits 0, or read with the right key), answered by a Set
    /// that wrote it, or handed over at start ([`crate::sm::Sm::set_known_m_keys`],
    /// OpenSM's `guid2mkey`). An SMP to a port whose key is known carries
    /// that key, not [`SmConfig::m_key`]: a new `m_key` takes over ports
    /// an earlier one protected. Off: every SMP carries `m_key`.
    pub m_key_lookup: bool,
    /// Gives each end port a key of its own instead of [`SmConfig::m_key`]
    /// itself (OpenSM's `m_key_per_port`, which OpenSM 3.3.23 does not
    /// have): SipHash-2-4 of the port GUID keyed by `m_key`
    /// ([`crate::sm::port_m_key`]), so that a host that learns the key
    /// its port holds (from an SMP to it) cannot open any other port. An
    /// SM with the same `m_key` computes every port's key again from its
    /// GUID, with no cache; a port that answers no Get without its key
    /// (protect bits 2, 3) is reached before it is read only by the link
    /// the SM saw to it (`neighbors`) or the key it is known to hold.
    pub m_key_per_port: bool,
    /// SubnetTimeOut written to every port.
    pub subnet_time_out: u8,
    /// What else OpenSM writes as it brings the links up: head-of-queue
    /// lifetimes, VL stall counts, the operational VLs' limit, the error
    /// thresholds, the SM's SL, and switches' packet lifetime.
    pub link: LinkParams,
    /// The routing engine.
    pub routing: Engine,
    /// How hypervisors' VFs get LIDs.
    pub lid_policy: LidPolicy,
    /// Milliseconds between light sweeps once the subnet is up (`None`:
    /// sweep only when a trap arrives).
    pub sweep_interval_ms: Option<u64>,
    /// Every periodic sweep a heavy one ([`Sm::request_heavy_sweep`]), as
    /// OpenSM's `force_heavy_sweep`.
    pub force_heavy_sweep: bool,
    /// Static reconfiguration: when a change is assimilated, first take
    /// every CA port's link down so it retrains to Init (no data traffic),
    /// then send the tables, then bring the ports back to Active.
    pub static_reconfig: bool,
    /// Rounds in which the requests of a bring-up phase that were given up
    /// (each after `retries` retransmissions) are sent again, before the SM
    /// stops and names what it could not reach. Until then it neither
    /// routes a partial fabric nor calls it up.
    pub rounds: u32,
    /// This SM's priority in the election (0–15, as OpenSM's `-p`): the
    /// highest is master; between equals, the lower port GUID.
    pub priority: u8,
    /// SM_Key (OpenSM's default: 1): an SM with another non-zero key is
    /// ignored, and a SubnSet(SMInfo) must carry it.
    pub sm_key: u64,
    /// Milliseconds between a standby's polls of its master's SMInfo. A
    /// poll unanswered after `retries` retransmissions (`timeout_ms` each)
    /// means the master is gone: detection takes at most `poll_ms +
    /// (retries + 1) × timeout_ms`.
    pub poll_ms: u64,
    /// Starting as master (not taking over from another SM), give every
    /// port a LID afresh, as OpenSM's `reassign_lids` (`-r`) does; by
    /// default a port keeps the LID it holds, unless a `guid2lid` cache
    /// gives that LID to another port (as OpenSM keeps them), so that an
    /// SM started again on a running subnet changes no LID.
    pub reassign_lids: bool,
    /// LID Mask Control of every CA port (0–7, OpenSM's `lmc`; above 7 is
    /// taken as 7): each CA port gets `2^lmc` consecutive LIDs, the first
    /// a multiple of `2^lmc`, and the routing engine routes each of them,
    /// spreading them over the equal-cost ports it has (so a host pair has
    /// up to `2^lmc` distinct paths, which the SA lists as OpenSM's does).
    /// A switch's port 0 keeps one LID, as with OpenSM's default
    /// `lmc_esp0 FALSE`; a hypervisor's VFs one LID each.
    pub lmc: u8,
    /// OpenSM's `lmc_esp0`: a switch whose port 0 is enhanced
    /// (SwitchInfo.EnhancedPort0) gets `2^lmc` LIDs too, and every one is
    /// routed to it. A base port 0 keeps one LID whatever this says (it
    /// has no LMC).
    pub lmc_esp0: bool,
    /// OpenSM's `no_clients_rereg`: never ask end ports' clients to
    /// reregister. By default the Set(PortInfo) that gives an end port its
    /// LID carries ClientReregister (IBA 14.4.11), where the port's
    /// CapabilityMask has IsClientReregistrationSupported, when the SM
    /// brings the subnet up (at start or taking over: the hosts' SA state
    /// — multicast memberships, services, subscriptions — was another
    /// SM's, or none), for a node that comes back or is new, and for a
    /// port that names another master SM; so its hosts join their
    /// multicast groups and register their services with this SM's SA.
    pub no_clients_rereg: bool,
    /// The subnet prefix written to every end port's PortInfo.GidPrefix
    /// (OpenSM's `subnet_prefix`; by default fe80::/64, the link-local
    /// prefix IBA 4.1.1 gives a subnet without a router): the first half
    /// of every port's GID, and so of every GID the SA answers with.
    pub subnet_prefix: u64,
    /// Node GUIDs of the switches up*/down* and fat-tree routing take as
    /// roots (OpenSM's `root_guid_file`); empty, or none of them a live
    /// switch: the engine picks them, as OpenSM without the file. A GUID
    /// that names no live switch is skipped, as OpenSM skips it.
    pub root_guids: Vec<u64>,
    /// The switches' tables for [`Engine::File`] (OpenSM's `lfts_file`);
    /// `None`: that engine routes min-hop, as OpenSM's does without a
    /// file. Other engines ignore it.
    pub lfts_file: Option<super::lft_file::LftFile>,
    /// The engine that routes where [`Engine::File`]'s tables do not fit
    /// the fabric (OpenSM's next engine in `routing_engine`, as in
    /// `file,updn`): min-hop by default, as OpenSM's. `File` itself is
    /// read as min-hop.
    pub file_fallback: Engine,
    /// OpenSM's `connect_roots` (`-z`): up*/down* routes the roots' own
    /// LIDs by min-hop from every switch, so the roots reach each other,
    /// as IBA asks (where the roots were found, or more than one named,
    /// as OpenSM's). Off: by up*/down*, with min-hop only where
    /// up*/down* reaches no way (OpenSM leaves those unreachable).
    pub connect_roots: bool,
    /// The SL and VL LASH's first layer takes (OpenSM's `lash_start_vl`):
    /// layer `k` is SL `lash_start_vl + k`, and the VLs below it are not
    /// LASH's. 0 by default.
    pub lash_start_vl: u8,
    /// Port GUIDs whose LIDs min-hop and up*/down* route first, in this
    /// order (OpenSM's `guid_routing_order_file`), so each switch spreads
    /// them over its equal-cost ports before any other destination. A
    /// GUID no port has is skipped, and so is one named again, as OpenSM
    /// skips them.
    pub routing_order: Vec<u64>,
    /// How min-hop and up*/down* pick among equal-cost ports, and the
    /// hop weights min-hop routes by (OpenSM's `hop_weights_file`,
    /// `port_search_ordering_file`, `port_shifting`, `scatter_ports`,
    /// `guid_routing_order_no_scatter`, `port_profile_switch_nodes`,
    /// `port_prof_ignore_file`).
    pub port_selection: PortSelection,
    /// Which partition enforcement bits the switch ports cabled to CAs
    /// get (OpenSM's `part_enforce`; `no_partition_enforcement` is
    /// [`PartEnforce::Off`]). Only with a partition configuration.
    pub part_enforce: PartEnforce,
    /// OpenSM's `sweep_on_trap` (default true): a trap that reports a
    /// change (128 link state, 64/65 GID in and out of service) starts a
    /// sweep. False: traps are still repressed, and the change waits for
    /// the periodic sweep (none without one, as OpenSM's).
    pub sweep_on_trap: bool,
    /// OpenSM's `ignore_other_sm`: never ask another SM's port for its
    /// SMInfo (at discovery, on its trap 144, when it polls this one, in a
    /// sweep), so this SM takes no part in the election and becomes master
    /// whatever SMs are there; it still answers their SMInfo requests and
    /// obeys a legal SubnSet(SMInfo). For a subnet with one SM, or tests.
    pub ignore_other_sm: bool,
    /// OpenSM's `sm_inactive`: the SM starts NOT ACTIVE (IBA 14.4.1). It
    /// sends nothing and answers SMInfo requests with state NotActive
    /// (so other SMs' elections pass it over) until a master's
    /// SubnSet(SMInfo, Discover) makes it discover, after which it takes
    /// part in the election as any SM.
    pub sm_inactive: bool,
    /// OpenSM's `disable_multicast`: no multicast forwarding. Groups are
    /// still kept ([`Sm::set_multicast_group`] records them, so the SA
    /// lists them), but no tree is built and no switch's
    /// MulticastForwardingTable or MulticastFDBTop is written.
    pub disable_multicast: bool,
    /// Polls of the master (each after its own retransmissions) that a
    /// standby lets go unanswered in a row before it takes over (OpenSM's
    /// `polling_retry_number`; 0, the default: at the first). A poll its
    /// port answers with an error (no SM there) counts as unanswered, as
    /// OpenSM counts it.
    pub polling_retries: u32,
    /// OpenSM's `use_mfttop` (true by default): a switch that advertises
    /// IsMulticastFDBTopSupported gets SwitchInfo.MulticastFDBTop at the
    /// end of the highest MFT block it uses. False: the field is left as
    /// the switch holds it (a switch that honours it and starts at
    /// 0xBFFF then forwards no multicast, under OpenSM too), for switches
    /// whose firmware gets it wrong.
    pub use_mfttop: bool,
    /// OpenSM's `babbling_port_policy`: a port that has sent the same
    /// trap 129, 130 or 131 more than 250 times in a row (no 5 s apart,
    /// 60 s once it is unhealthy) is disabled, its link's end nearer the
    /// SM. Off by default, as OpenSM's: such a port is only routed around.
    pub babbling_port_policy: bool,
    /// OpenSM's `use_optimized_slvl`: a switch that advertises optimized
    /// SL-to-VL programming gets one Set(SLtoVLMappingTable) with
    /// AllInputPorts and AllOutputPorts rather than one a pair of ports.
    /// True by default in ibkit; OpenSM's default is false, and an
    /// `opensm.conf` that says so turns it off here too.
    pub use_optimized_slvl: bool,
    /// OpenSM's `allow_both_pkeys` (false by default, as OpenSM's): a
    /// port a partition names `both` holds the full and the limited
    /// P_Key. False: `both` is taken as full, and a port holds one P_Key
    /// a partition.
    pub allow_both_pkeys: bool,
    /// OpenSM's `keep_pkey_indexes` (true by default, as OpenSM's): a
    /// P_Key keeps the index it holds in a port's table. False: every
    /// port's table is laid out afresh at each distribution (the default
    /// or `indx0` key at index 0, the others packed from index 1 in
    /// OpenSM's order), so a partition taken away leaves no hole. VMs'
    /// tables keep their indexes either way (their QPs name keys by
    /// index across a migration).
    pub keep_pkey_indexes: bool,
    /// OpenSM's `honor_guid2lid_file` (false by default, as OpenSM's):
    /// taking the subnet over from a master, the LIDs of
    /// [`Sm::set_preferred_lids`] (a `guid2lid` the driver reads again
    /// then) are given as at a fresh start, where they are usable, over
    /// the LIDs the ports hold. False: the LIDs the ports hold win.
    pub honor_guid2lid_file: bool,
}

/// Partition enforcement on the switch ports cabled to CAs, as OpenSM's
/// `part_enforce` names it: PortInfo's PartitionEnforcementInbound and
/// PartitionEnforcementOutbound (IBA 14.2.5.6, 10.9.3). A port whose
/// P_Key table cannot hold every key of its CA enforces neither way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PartEnforce {
    /// Inbound and outbound (OpenSM's default, `both`).
    #[default]
    Both,
    /// Inbound only: packets from the CA are checked (`in`).
    In,
    /// Outbound only: packets to the CA are checked (`out`).
    Out,
    /// Neither: the switch ports' P_Key tables are not written either,
    /// and their bits are cleared where set (`off`).
    Off,
}

impl PartEnforce {
    /// The mode OpenSM's `part_enforce` value names (`both`, `in`, `out`,
    /// `off`, as OpenSM compares them: exactly).
    pub fn from_opensm(s: &str) -> Option<Self> {
        Some(match s {
            "both" => Self::Both,
            "in" => Self::In,
            "out" => Self::Out,
            "off" => Self::Off,
            _ => return None,
        })
    }

    /// OpenSM's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            Self::Both => "both",
            Self::In => "in",
            Self::Out => "out",
            Self::Off => "off",
        }
    }

    /// The (inbound, outbound) bits of a port that can enforce (`fits`:
    /// its table holds every key of its CA) or cannot.
    pub fn bits(self, fits: bool) -> (bool, bool) {
        match self {
            _ if !fits => (false, false),
            Self::Both => (true, true),
            Self::In => (true, false),
            Self::Out => (false, true),
            Self::Off => (false, false),
        }
    }
}

/// The routing engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Engine {
    /// Shortest paths, balanced over equal-cost ports (OpenSM's minhop).
    #[default]
    MinHop,
    /// Up*/down*: deadlock-free by construction (OpenSM's updn).
    UpDown,
    /// Fat-tree: up*/down* from the top level with d-mod-k spreading upwards.
    FatTree,
    /// The tables a file gives ([`SmConfig::lfts_file`], OpenSM's `file`
    /// engine with its `lfts_file`); without one, or where the file does
    /// not fit the fabric, [`SmConfig::file_fallback`] (min-hop by
    /// default).
    File,
    /// Dimension-order routing for meshes and hypercubes (OpenSM's
    /// `dor`): min-hop towards the neighbour behind each switch's first
    /// best port ([`routing::dor`]).
    Dor,
    /// Layered shortest paths (OpenSM's `lash`): one shortest route a
    /// pair of switches ([`routing::dor`]'s tables), and a service level for every pair of switches such that each level's
    /// routes are free of deadlock ([`super::lash`]); needs an SL-to-VL
    /// mapping that gives each SL its own VL (`--qos`, as OpenSM's `-R
    /// lash -Q`). Under LMC, or where the VLs are too few, min-hop.
    Lash,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Engine; 6] = [
        Engine::MinHop,
        Engine::UpDown,
        Engine::FatTree,
        Engine::File,
        Engine::Dor,
        Engine::Lash,
    ];

    /// The engine's name as OpenSM's `-R` option spells it, and as ibkit
    /// takes it on the command line and writes it in JSON output:
    /// `minhop`, `updn`, `ftree`, `file`, `dor` or `lash`.
    pub const fn name(self) -> &'static str {
        match self {
            Engine::MinHop => "minhop",
            Engine::UpDown => "updn",
            Engine::FatTree => "ftree",
            Engine::File => "file",
            Engine::Dor => "dor",
            Engine::Lash => "lash",
        }
    }

    /// The engine called `name` (see [`Engine::name`]), or `None`.
    pub fn from_name(name: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.name() == name)
    }
}

/// A routing engine: linear forwarding tables for a switch graph.
pub trait RoutingEngine {
    /// `lft[switch][lid]` = egress port (0xFF: unrouted) for LIDs
    /// 0..=`max_lid`, every switch and CA LID of `g` routed.
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>>;
}

/// Shortest paths, balanced over equal-cost ports.
pub struct MinHopEngine;
/// Up*/down* from automatically chosen roots, with shortest-path entries
/// where up*/down* leaves a switch without a way (see [`routing::fill_gaps`]).
pub struct UpDownEngine;
/// Fat-tree: down-set BFS and d-mod-k spreading upwards; on a degraded tree
/// it falls back to [`UpDownEngine`].
pub struct FatTreeEngine;

impl RoutingEngine for MinHopEngine {
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        routing::minhop(g, max_lid)
    }
}

impl UpDownEngine {
    /// The tables, and the turn that kept them from being OpenSM's
    /// ([`updn::route_as_opensm`]; then [`updn::route_tree`] routed).
    pub fn route_noting(&self, g: &Graph, max_lid: u16) -> (Vec<Vec<u8>>, Option<updn::Turn>) {
        let roots = updn::roots(g);
        let (mut t, turn) = match updn::route_as_opensm(g, max_lid, &roots) {
            (t, None) => (t, None),
            (_, turn) => (updn::route_tree(g, max_lid, &roots), turn),
        };
        routing::fill_gaps(g, &mut t);
        (t, turn)
    }
}

impl RoutingEngine for UpDownEngine {
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        self.route_noting(g, max_lid).0
    }
}

impl FatTreeEngine {
    /// The tables, and whether they are the fat-tree's own (false: the
    /// tree was degraded and up*/down* routed it instead).
    pub fn route_or_fall_back(&self, g: &Graph, max_lid: u16) -> (Vec<Vec<u8>>, bool) {
        let t = updn::ftree(g, max_lid, &updn::roots(g));
        // A degraded tree (a cable or switch missing) can leave a switch
        // with no up*/down* way to a destination: then, as OpenSM's ftree
        // falls back to another engine, route the whole fabric up*/down*.
        if complete(g, &t) {
            (t, true)
        } else {
            (UpDownEngine.route(g, max_lid), false)
        }
    }
}

impl RoutingEngine for FatTreeEngine {
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        self.route_or_fall_back(g, max_lid).0
    }
}

impl RoutingEngine for Engine {
    fn route(&self, g: &Graph, max_lid: u16) -> Vec<Vec<u8>> {
        match self {
            Engine::MinHop => MinHopEngine.route(g, max_lid),
            Engine::UpDown => UpDownEngine.route(g, max_lid),
            Engine::FatTree => FatTreeEngine.route(g, max_lid),
            // The file needs the subnet's port GUIDs (the SM routes it,
            // [`Sm::route`]); on a graph alone it is min-hop.
            Engine::File => MinHopEngine.route(g, max_lid),
            Engine::Dor => routing::dor(g, max_lid),
            // The layers are the SM's to keep ([`super::lash`]): the
            // tables are dor's, one shortest route a pair of switches.
            Engine::Lash => routing::dor(g, max_lid),
        }
    }
}

impl Default for SmConfig {
    fn default() -> Self {
        SmConfig {
            window: 16,
            window2: 0,
            stuck_ms: 600,
            timeout_ms: 200,
            long_timeout_ms: 500,
            retries: 3,
            m_key: MKey(0),
            m_key_protect_bits: 0,
            m_key_lease_period: 0,
            m_key_lookup: true,
            m_key_per_port: false,
            subnet_time_out: 18,
            link: LinkParams::default(),
            routing: Engine::MinHop,
            lid_policy: LidPolicy::Prepopulated,
            sweep_interval_ms: None,
            force_heavy_sweep: false,
            static_reconfig: false,
            rounds: 8,
            priority: 0,
            sm_key: 1,
            poll_ms: 500,
            reassign_lids: false,
            lmc: 0,
            lmc_esp0: false,
            no_clients_rereg: false,
            subnet_prefix: mad_core::Gid::DEFAULT_PREFIX,
            root_guids: Vec::new(),
            lfts_file: None,
            file_fallback: Engine::MinHop,
            connect_roots: false,
            lash_start_vl: 0,
            routing_order: Vec::new(),
            port_selection: PortSelection::default(),
            part_enforce: PartEnforce::Both,
            sweep_on_trap: true,
            ignore_other_sm: false,
            sm_inactive: false,
            disable_multicast: false,
            polling_retries: 0,
            use_mfttop: true,
            babbling_port_policy: false,
            use_optimized_slvl: true,
            allow_both_pkeys: false,
            keep_pkey_indexes: true,
            honor_guid2lid_file: false,
        }
    }
}

/// The link parameters an SM writes as it brings the links up, named as
/// OpenSM's options and with OpenSM's defaults; each rides on a Set the
/// bring-up sends anyway (the Set(PortInfo) that arms a port, the one
/// that gives an end port its LID, the Set(SwitchInfo) with
/// LinearFDBTop), so they cost no SMP; but a link width or speed a
/// `force_link_*` changes goes in a Set(PortInfo) of its own before the
/// port is armed, as OpenSM sends it. On a port already Active when the
/// SM starts, or at a heavy sweep, what differs is set again; its
/// OperationalVLs stay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkParams {
    /// HOQLife of a switch port cabled to a switch (`head_of_queue_lifetime`,
    /// 4.096 µs × 2^value; 20 and above: no limit).
    pub hoq_lifetime: u8,
    /// HOQLife of a switch port cabled to a CA or router
    /// (`leaf_head_of_queue_lifetime`): shorter, so a stalled host's
    /// packets are dropped before they back up the fabric.
    pub leaf_hoq_lifetime: u8,
    /// VLStallCount of a switch port cabled to a switch (`vl_stall_count`).
    pub vl_stall_count: u8,
    /// VLStallCount of a switch port cabled to a CA or router
    /// (`leaf_vl_stall_count`).
    pub leaf_vl_stall_count: u8,
    /// OperationalVLs at most (`max_op_vls`, PortInfo's encoding: 1 VL0,
    /// 2 VL0–1, 3 VL0–3, 4 VL0–7, 5 VL0–14); a link runs the fewer of
    /// its two ends' VLCap and this.
    pub max_op_vls: u8,
    /// LocalPhyErrors threshold (`local_phy_errors_threshold`).
    pub local_phy_errors_threshold: u8,
    /// OverrunErrors threshold (`overrun_errors_threshold`).
    pub overrun_errors_threshold: u8,
    /// MasterSMSL of every end port (`sm_sl`, 0–15): the SL a port's
    /// traps and the SM's own MADs travel on.
    pub sm_sl: u8,
    /// SwitchInfo.LifeTimeValue of every switch (`packet_life_time`,
    /// 4.096 µs × 2^value a packet may live in a switch; 20 and above:
    /// no limit), written with LinearFDBTop; the SA's PathRecords sum it
    /// along the path.
    pub packet_life_time: u8,
    /// LinkWidthEnabled written to every linked port (`force_link_width`,
    /// PortInfo's encoding: 1 1X, 2 4X, 4 8X, 8 12X, 16 2X, or their sum;
    /// 255 sets it to LinkWidthSupported, written only where it is not;
    /// 0 leaves it). A value with the 2X bit (255 included) is written
    /// only to a port that advertises IsLinkWidth2XSupported, as OpenSM.
    pub force_link_width: u8,
    /// LinkSpeedEnabled written to every linked port (`force_link_speed`:
    /// 1 SDR, 2 DDR, 4 QDR, or their sum; 15 sets it to
    /// LinkSpeedSupported, written only where it is not; 0 leaves it).
    pub force_link_speed: u8,
    /// LinkSpeedExtEnabled written to a linked port whose two ends both
    /// advertise IsExtendedSpeedsSupported (`force_link_speed_ext`: 1 FDR,
    /// 2 EDR, 4 HDR, 8 NDR, or their sum; 30 disables the extended
    /// speeds; 31 sets it to LinkSpeedExtSupported, written only where it
    /// is not; 0 leaves it).
    pub force_link_speed_ext: u8,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            hoq_lifetime: 0x12,
            leaf_hoq_lifetime: 0x10,
            vl_stall_count: 7,
            leaf_vl_stall_count: 7,
            max_op_vls: 5,
            local_phy_errors_threshold: 8,
            overrun_errors_threshold: 8,
            sm_sl: 0,
            packet_life_time: 0x12,
            force_link_width: 255,
            force_link_speed: 15,
            force_link_speed_ext: 31,
        }
    }
}
