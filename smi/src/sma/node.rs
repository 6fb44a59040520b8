//! The node model an SMA answers from: node identity, per-port attributes,
//! and a switch's forwarding tables, all in bounded (`heapless`) storage.

use heapless::Vec;
use mad_core::attr::*;
use mad_core::types::{Guid, Lid, MKey, PKey};

use super::mkey::Lease;

/// P_Key entries a port can hold.
pub const MAX_PKEYS: usize = 64;
/// GUID entries (GUIDInfo) a port can hold.
pub const MAX_GUIDS: usize = 32;
/// Port groups of 16 in a multicast forwarding entry (ports 0–79).
pub const MFT_POSITIONS: usize = 5;

/// What a node is, for building its SMA.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    /// Channel adapter or switch.
    pub node_type: NodeType,
    /// Physical ports.
    pub num_ports: u8,
    /// Node GUID; port GUIDs of a CA are node GUID + port number, a
    /// switch's single port GUID is the node GUID.
    pub node_guid: Guid,
    /// System image GUID.
    pub system_image_guid: Guid,
    /// IEEE OUI.
    pub vendor_id: u32,
    /// Device ID.
    pub device_id: u16,
    /// NodeDescription text (at most 64 bytes are kept).
    pub description: mad_core::field::Text<64>,
    /// P_Key entries per port.
    pub partition_cap: u16,
    /// GUIDInfo entries per port.
    pub guid_cap: u8,
    /// Linear forwarding table capacity (switches).
    pub linear_fdb_cap: u16,
    /// Multicast forwarding table capacity (switches).
    pub multicast_fdb_cap: u16,
    /// Whether an SM may run on this node's ports (CapabilityMask.IsSM).
    pub is_sm: bool,
    /// A switch whose port 0 is enhanced (SwitchInfo.EnhancedPort0): it
    /// takes an LMC, so it may hold a range of LIDs. A base port 0 holds
    /// one LID (IBA 1.2.1 table 146: LMC is not valid there).
    pub enhanced_port0: bool,
}

impl NodeSpec {
    /// A channel adapter with `ports` ports.
    pub fn ca(guid: u64, ports: u8, description: &str) -> Self {
        NodeSpec {
            node_type: NodeType::ChannelAdapter,
            num_ports: ports,
            node_guid: Guid(guid),
            system_image_guid: Guid(guid),
            vendor_id: 0x0002c9,
            device_id: 0x1017,
            description: mad_core::field::Text::from_str_lossy(description),
            partition_cap: 16,
            guid_cap: 8,
            linear_fdb_cap: 0,
            multicast_fdb_cap: 0,
            is_sm: false,
            enhanced_port0: false,
        }
    }
    /// A switch with `ports` external ports and a 48K-entry LFT.
    pub fn switch(guid: u64, ports: u8, description: &str) -> Self {
        NodeSpec {
            node_type: NodeType::Switch,
            num_ports: ports,
            node_guid: Guid(guid),
            system_image_guid: Guid(guid),
            vendor_id: 0x0002c9,
            device_id: 0xc738,
            description: mad_core::field::Text::from_str_lossy(description),
            partition_cap: 8,
            guid_cap: 1,
            linear_fdb_cap: 0xC000,
            multicast_fdb_cap: 1024,
            is_sm: false,
            enhanced_port0: false,
        }
    }
}

/// Everything an SMA keeps for one port.
#[derive(Clone, Debug, PartialEq)]
pub struct Port<const P: usize> {
    /// PortInfo as the SMA reports it.
    pub info: PortInfo,
    /// M_Key lease.
    pub lease: Lease,
    /// GUIDInfo entries (entry 0 is the hardware port GUID).
    pub guids: Vec<Guid, MAX_GUIDS>,
    /// P_Key table.
    pub pkeys: Vec<PKey, MAX_PKEYS>,
    /// SL-to-VL tables, indexed by input port (CAs use entry 0).
    pub sl2vl: Vec<SlToVlMappingTable, P>,
    /// VL arbitration: low 0–31, low 32–63, high 0–31, high 32–63.
    pub vl_arb: [VlArbitrationTable; 4],
    /// PortInfoExtended.
    pub ext: PortInfoExtended,
    /// Mellanox ExtendedPortInfo (0xFF90): OpenSM reads it from ports of
    /// Mellanox-vendor nodes; no FDR10 support is claimed.
    pub mlnx_ext: mad_core::attr::MlnxExtPortInfo,
    /// Client reregistrations the SM asked of this port (a Set(PortInfo)
    /// with ClientReregister, IBA 14.4.11): each is an event to the
    /// node's SA clients, which join their multicast groups and register
    /// their services and subscriptions again. The bit itself is not
    /// kept: it reads as 0 in a Get, as qib and ibsim answer.
    pub client_reregistrations: u32,
}

/// The attributes of one node.
#[derive(Clone, Debug, PartialEq)]
pub struct Model<const P: usize, const L: usize, const M: usize> {
    /// NodeInfo (LocalPortNum and PortGUID are filled per request).
    pub node_info: NodeInfo,
    /// NodeDescription.
    pub node_description: NodeDescription,
    /// SwitchInfo (switches).
    pub switch_info: SwitchInfo,
    /// Ports 0..=num_ports (a CA's port 0 is unused).
    pub ports: Vec<Port<P>, P>,
    /// Linear forwarding table, `linear_fdb_cap` entries (0xFF = drop).
    pub lft: Vec<u8, L>,
    /// Multicast forwarding table: per MLID, a 16-port mask per position.
    pub mft: Vec<[u16; MFT_POSITIONS], M>,
    /// SMInfo, for a node that runs an SM.
    pub sm_info: SmInfo,
    /// LedInfo.
    pub led: LedInfo,
}

impl<const P: usize, const L: usize, const M: usize> Model<P, L, M> {
    /// Builds the model of a node that has just powered up: ports Down,
    /// no LIDs, empty forwarding tables. Capacities above the storage the
    /// type provides are clamped to it.
    pub fn new(spec: &NodeSpec) -> Self {
        let is_switch = spec.node_type == NodeType::Switch;
        let nports = usize::from(spec.num_ports).min(P.saturating_sub(1));
        let mut cap = CapabilityMask::IS_TRAP_SUPPORTED
            | CapabilityMask::IS_NOTICE_SUPPORTED
            | CapabilityMask::IS_SL_MAPPING_SUPPORTED
            | CapabilityMask::IS_LED_INFO_SUPPORTED
            | CapabilityMask::IS_SYSTEM_IMAGE_GUID_SUPPORTED
            | CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED
            | CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED;
        if is_switch {
            // MulticastFDBTop bounds the MFT entries in use (see
            // `Model::mft_entry`).
            cap |= CapabilityMask::IS_MULTICAST_FDB_TOP_SUPPORTED;
        } else {
            // A CA traps 144 when its CapabilityMask changes (an SM
            // starting on it), as ibsim's and real HCAs' ports do
            // (`Sma::capability_changed`).
            cap |= CapabilityMask::IS_CAPABILITY_MASK_NOTICE_SUPPORTED;
        }
        let mut ports = Vec::new();
        for p in 0..=nports {
            let external = p != 0 || !is_switch;
            let guid = if is_switch {
                spec.node_guid
            } else {
                Guid(spec.node_guid.0.wrapping_add(p as u64))
            };
            // IsSM is the port an SM runs on (a switch's port 0, a CA's
            // port 1), as an SM registering there sets it; not every
            // port of its node.
            let sm_port = if is_switch { 0 } else { 1 };
            let cap = if spec.is_sm && p == sm_port {
                cap | CapabilityMask::IS_SM
            } else {
                cap
            };
            let info = PortInfo {
                gid_prefix: mad_core::field::GidPrefix(mad_core::Gid::DEFAULT_PREFIX),
                capability_mask: cap,
                capability_mask2: CapabilityMask2::IS_SET_NODE_DESCRIPTION_SUPPORTED
                    | CapabilityMask2::IS_PORT_INFO_EXTENDED_SUPPORTED,
                local_port_num: p as u8,
                link_width_enabled: LinkWidth::W4X,
                link_width_supported: LinkWidth::W1X | LinkWidth::W4X,
                link_width_active: LinkWidth::W4X,
                link_speed_supported: LinkSpeed::SDR | LinkSpeed::DDR | LinkSpeed::QDR,
                link_speed_enabled: LinkSpeed::SDR | LinkSpeed::DDR | LinkSpeed::QDR,
                link_speed_active: LinkSpeed::QDR,
                port_state: if external {
                    PortState::Down
                } else {
                    PortState::Active
                },
                port_physical_state: if external {
                    PortPhysicalState::Polling
                } else {
                    PortPhysicalState::LinkUp
                },
                link_down_default_state: LinkDownDefaultState::Polling,
                neighbor_mtu: Mtu::Mtu4096,
                mtu_cap: Mtu::Mtu4096,
                vl_cap: VlCap::Vl0To7,
                operational_vls: VlCap::Vl0To7,
                vl_high_limit: 0,
                vl_arbitration_high_cap: 8,
                vl_arbitration_low_cap: 8,
                guid_cap: spec.guid_cap.min(MAX_GUIDS as u8),
                subnet_time_out: 18,
                resp_time_value: 16,
                ..Default::default()
            };
            let mut guids = Vec::new();
            for i in 0..usize::from(info.guid_cap) {
                let _ = guids.push(if i == 0 { guid } else { Guid(0) });
            }
            let npk = spec.partition_cap;
            let mut pkeys = Vec::new();
            for i in 0..usize::from(npk).min(MAX_PKEYS) {
                let _ = pkeys.push(if i == 0 { PKey::DEFAULT_FULL } else { PKey(0) });
            }
            let mut sl2vl = Vec::new();
            let inputs = if is_switch { nports + 1 } else { 1 };
            for _ in 0..inputs.min(P) {
                let _ = sl2vl.push(SlToVlMappingTable::default());
            }
            let _ = ports.push(Port {
                info,
                lease: Lease::default(),
                guids,
                pkeys,
                sl2vl,
                vl_arb: [VlArbitrationTable::default(); 4],
                ext: PortInfoExtended::default(),
                mlnx_ext: Default::default(),
                client_reregistrations: 0,
            });
        }
        let mut lft = Vec::new();
        if is_switch {
            lft.resize(
                usize::from(spec.linear_fdb_cap).min(L),
                forwarding::DROP_PORT,
            )
            .ok();
        }
        let mut mft = Vec::new();
        if is_switch {
            mft.resize(
                usize::from(spec.multicast_fdb_cap).min(M),
                [0; MFT_POSITIONS],
            )
            .ok();
        }
        Model {
            node_info: NodeInfo {
                base_version: 1,
                class_version: 1,
                node_type: spec.node_type,
                num_ports: nports as u8,
                system_image_guid: spec.system_image_guid,
                node_guid: spec.node_guid,
                port_guid: spec.node_guid,
                partition_cap: spec.partition_cap.min(MAX_PKEYS as u16),
                device_id: spec.device_id,
                revision: 1,
                local_port_num: 0,
                vendor_id: spec.vendor_id,
            },
            node_description: NodeDescription {
                node_string: spec.description,
            },
            switch_info: if is_switch {
                SwitchInfo {
                    linear_fdb_cap: lft.len() as u16,
                    multicast_fdb_cap: mft.len() as u16,
                    linear_fdb_top: 0,
                    default_port: 0,
                    default_multicast_primary_port: 0xFF,
                    default_multicast_not_primary_port: 0xFF,
                    life_time_value: 18,
                    lids_per_port: 0,
                    partition_enforcement_cap: spec.partition_cap.min(MAX_PKEYS as u16),
                    multicast_fdb_top: 0xBFFF,
                    // AllInputPorts / AllOutputPorts honoured in SLtoVL Sets.
                    optimized_sl_to_vl_mapping_programming: 1,
                    enhanced_port0: spec.enhanced_port0,
                    ..Default::default()
                }
            } else {
                SwitchInfo::default()
            },
            ports,
            lft,
            mft,
            sm_info: SmInfo {
                guid: spec.node_guid,
                ..Default::default()
            },
            led: LedInfo::default(),
        }
    }

    /// True when `other` differs from this model at most in what an M_Key
    /// check may change on any request (lease, protect bits after a lapse,
    /// violation counter): what "changes no state" means for a refused SMP.
    pub fn same_but_m_key_state(&self, other: &Model<P, L, M>) -> bool {
        let mut o = other.clone();
        for (a, b) in self.ports.iter().zip(o.ports.iter_mut()) {
            b.lease = a.lease;
            b.info.m_key_violations = a.info.m_key_violations;
            b.info.m_key_protect_bits = a.info.m_key_protect_bits;
        }
        *self == o
    }

    /// True for a switch.
    pub fn is_switch(&self) -> bool {
        self.node_info.node_type == NodeType::Switch
    }

    /// The LFT egress port for `lid` (drop above LinearFDBTop or capacity).
    pub fn lft_port(&self, lid: Lid) -> u8 {
        if lid.0 > self.switch_info.linear_fdb_top {
            return forwarding::DROP_PORT;
        }
        self.lft
            .get(usize::from(lid.0))
            .copied()
            .unwrap_or(forwarding::DROP_PORT)
    }

    /// The MFT entry (port masks by position) for multicast LID `mlid`:
    /// none above MulticastFDBTop (the switch advertises
    /// IsMulticastFDBTopSupported and ignores those entries), past
    /// MulticastFDBCap, or for a unicast LID.
    pub fn mft_entry(&self, mlid: Lid) -> Option<&[u16; MFT_POSITIONS]> {
        if mlid.0 > self.switch_info.multicast_fdb_top {
            return None;
        }
        self.mft.get(usize::from(mlid.0.checked_sub(0xC000)?))
    }

    /// The port whose PortInfo carries the M_Key for an SMP that arrived on
    /// `port`: a switch's port 0, else the arrival port.
    pub fn mkey_port(&self, port: u8) -> u8 {
        if self.is_switch() {
            0
        } else {
            port
        }
    }

    /// The LID by which this node is addressed from `port` (a switch's
    /// port 0 LID, or the CA port's).
    pub fn lid(&self, port: u8) -> Lid {
        let p = self.mkey_port(port);
        self.ports
            .get(usize::from(p))
            .map(|x| x.info.lid)
            .unwrap_or_default()
    }

    /// True when a packet for `lid` is for `port` (a switch: its port 0):
    /// `lid` is the port's LID or one of the `2^LMC - 1` above it (IBA
    /// 7.11.1: the port ignores the low LMC bits of the DLID).
    pub fn owns_lid(&self, port: u8, lid: Lid) -> bool {
        let p = self.mkey_port(port);
        self.ports.get(usize::from(p)).is_some_and(|x| {
            let (base, lmc) = (x.info.lid.0, x.info.lmc.min(7));
            base != 0 && lid.0 >> lmc == base >> lmc
        })
    }

    /// The M_Key of the port guarding `port`.
    pub fn m_key(&self, port: u8) -> MKey {
        let p = self.mkey_port(port);
        self.ports
            .get(usize::from(p))
            .map(|x| x.info.m_key)
            .unwrap_or_default()
    }
}
