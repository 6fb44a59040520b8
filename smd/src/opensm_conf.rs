//! `ibkit sm --opensm-config FILE`: OpenSM's own `opensm.conf`, as sites
//! keep it (or as `opensm -c FILE` writes it), read into the settings
//! ibkit's SM takes ([`SmFile`]), so that a site moves from OpenSM to
//! ibkit without writing its configuration again.
//!
//! The syntax is OpenSM's: one `option value` a line, `#` comments,
//! `(null)` for "not set", `TRUE`/`FALSE`, numbers in decimal, `0x` hex
//! or leading-zero octal (C's `strtoul` base 0, as OpenSM reads them).
//! What ibkit applies:
//!
//! | opensm.conf | ibkit |
//! |---|---|
//! | `guid` (0: not set) | the port to run on |
//! | `sm_priority`, `sm_key`, `sa_key`, `sm_assigned_guid` | the same |
//! | `m_key`, `m_key_protection_level`, `m_key_lease_period` (a lease no longer than `sweep_interval` made a second longer, as OpenSM does), `m_key_lookup` | the same |
//! | `m_key_per_port` (newer OpenSMs; 3.3.23 has none) | ibkit's own keys, one a port ([`smi::sm::port_m_key`]) |
//! | `lmc`, `lmc_esp0`, `connect_roots`, `lash_start_vl`, `reassign_lids`, `force_heavy_sweep`, `no_clients_rereg`, `subnet_prefix`, `root_guid_file`, `lfts_file` (read under `routing_engine file`), `guid_routing_order_file` (min-hop and up*/down*), `guid_routing_order_no_scatter`, `hop_weights_file` (min-hop), `port_search_ordering_file`, `port_shifting`, `scatter_ports`, `port_profile_switch_nodes`, `port_prof_ignore_file` (min-hop and up*/down*) | the same |
//! | `node_name_map_name` | `node_name_map` |
//! | `fsync_high_avail_files` | the same |
//! | `sweep_on_trap`, `ignore_other_sm`, `sm_inactive`, `disable_multicast`, `use_mfttop`, `babbling_port_policy`, `mcgroup_join_validation`, `ipoib_mcgroup_creation_validation`, `consolidate_ipv6_snm_req`, `use_original_extended_sa_rates_only`, `max_rate_enum` (OpenSM 3.3.24's), `drop_event_subscriptions`, `use_optimized_slvl` (OpenSM's default `FALSE` applies: one Set(SLtoVL) a pair of ports) | the same |
//! | `part_enforce` (`both`, `in`, `out`, `off`), `no_partition_enforcement` (`TRUE`: `off`, whatever `part_enforce` says) | `part_enforce` |
//! | `allow_both_pkeys`, `keep_pkey_indexes` | the same |
//! | `honor_guid2lid_file` (the `guid2lid` of `--cache-dir`, where OpenSM's is `OSM_CACHE_DIR`'s) | the same |
//! | `sweep_interval` (seconds; 0: no periodic sweep) | `sweep_ms` (0: none) |
//! | `sminfo_polling_timeout` (ms) | `poll_ms` |
//! | `polling_retry_number` | `poll_retries` |
//! | `subnet_timeout`, `head_of_queue_lifetime`, `leaf_head_of_queue_lifetime`, `vl_stall_count`, `leaf_vl_stall_count`, `max_op_vls`, `local_phy_errors_threshold`, `overrun_errors_threshold`, `packet_life_time`, `sm_sl`, `force_link_width`, `force_link_speed`, `force_link_speed_ext` | the same ([`smi::sm::LinkParams`]) |
//! | `transaction_timeout`, `transaction_retries`, `long_transaction_timeout` (below `transaction_timeout`: that, as OpenSM) | `timeout_ms`, `retries`, `long_timeout_ms` |
//! | `max_wire_smps` (0: no limit), `max_wire_smps2`, `max_smps_timeout` (µs) | the same |
//! | `routing_engine` (a list: the first ibkit has; after `file`, the next ibkit has, where the file does not fit, else min-hop) | `routing` (minhop, updn, ftree, file, dor, lash), `file_fallback` |
//! | `partition_config_file` (when the file is there: OpenSM too runs without it) | `partitions` |
//! | `qos` | `qos`, with this file's own `qos_*` options as `qos_config` |
//! | `qos_policy_file` (with `qos TRUE`, when the file is there) | `qos_policy` |
//! | `accum_log_file`, `log_max_size` (MiB), `log_prefix` | the same |
//! | `force_log_flush` | read; every line is written unbuffered, as `TRUE` asks |
//! | `log_file`, `log_flags` (DEBUG, FUNCS or FRAMES: debug; VERBOSE: debug; INFO: info; else error) | `log_file`, `log_level` |
//! | `dump_files_dir` (OpenSM's `/var/log/` when not set): `opensm-subnet.lst` always; the routing dumps when `log_flags` has ROUTING (0x40) | `subnet_lst_dir`; `dump_dir` |
//! | `sa_db_file` | `sa_db_file` |
//! | `sa_db_dump` (`TRUE`, or `log_flags` with VERBOSE (0x04): the SA's `opensm-sa.dump` in `dump_files_dir`) | `sa_db_dump_dir` |
//!
//! Every other option is read and not applied: they are named in one
//! note, and a few whose non-default value changes what the subnet does
//! (congestion control, the performance manager, a console) each get a
//! warning of their own. A value ibkit applies
//! that it cannot read, or that is out of range (`sm_priority 16`), is an
//! error with its line and column, before the fabric is touched; OpenSM
//! would take such a value as 0 or its default and go on.

use crate::config::{ConfigError, SmFile};
use smi::sm::{Engine, PartEnforce};
use std::path::{Path, PathBuf};

/// What reading an `opensm.conf` found besides the settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpensmConf {
    /// The settings ibkit applies.
    pub settings: SmFile,
    /// What is not applied, and why: one line each, with its place.
    pub notes: Vec<Note>,
}

/// One thing of the file that ibkit does not do as OpenSM would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Its line (0: the whole file).
    pub line: usize,
    /// A warning (the subnet will differ from OpenSM's) or only a note.
    pub warning: bool,
    /// What it says.
    pub text: String,
}

/// Options whose value, when not OpenSM's default, makes the subnet
/// differ from what OpenSM would make of it, and ibkit does not apply:
/// (option, OpenSM's default, what ibkit does instead).
const WARN_UNLESS: &[(&str, &str, &str)] = &[
    (
        "congestion_control",
        "FALSE",
        "ibkit has no congestion control",
    ),
    ("perfmgr", "FALSE", "ibkit has no performance manager"),
    ("console", "off", "ibkit has no console"),
    (
        "do_mesh_analysis",
        "FALSE",
        "ibkit's LASH does no mesh analysis",
    ),
];

/// Reads `text`, an `opensm.conf` at `file` (which names it in the QoS
/// setting); `exists` tells whether a file it names is there.
pub fn parse_opensm_conf(
    text: &str,
    file: &Path,
    exists: &dyn Fn(&Path) -> bool,
) -> Result<OpensmConf, ConfigError> {
    let mut s = SmFile::default();
    let mut notes = Vec::new();
    let mut skipped: Vec<&str> = Vec::new();
    let mut log_flags = None;
    let (mut sweep_line, mut lease_line) = (0, 0);
    let (mut dump_dir, mut qos_policy, mut partitions) = (None, None, None);
    let mut no_enforcement = false;
    let mut sa_db_dump = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let body = raw.trim_start();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let key_end = body.find([' ', '\t']).unwrap_or(body.len());
        let key = &body[..key_end];
        let value = body[key_end..].trim();
        // Where the value starts, for an error's column.
        let column = raw.len() - raw[raw.len() - body.len() + key_end..].trim_start().len() + 1;
        let bad = |reason: String| ConfigError {
            line,
            column,
            reason: format!("{key} {value}: {reason}"),
        };
        let null = value.is_empty() || value == "(null)";
        let number = || c_number(value).ok_or_else(|| bad("not a number".into()));
        let ranged = |lo: u64, hi: u64| -> Result<u64, ConfigError> {
            let v = number()?;
            if (lo..=hi).contains(&v) {
                Ok(v)
            } else {
                Err(bad(format!("not {lo}-{hi}")))
            }
        };
        // A link code of OpenSM's: 0..=hi, or one of `also` (OpenSM takes
        // its default for another; ibkit refuses it).
        let link_code = |hi: u64, also: &[u64]| -> Result<u8, ConfigError> {
            let v = number()?;
            if v <= hi || also.contains(&v) {
                Ok(v as u8)
            } else {
                let also: Vec<String> = also.iter().map(u64::to_string).collect();
                Err(bad(format!("not 0-{hi} or {}", also.join(" or "))))
            }
        };
        let boolean = || match value {
            v if v.eq_ignore_ascii_case("TRUE") => Ok(true),
            v if v.eq_ignore_ascii_case("FALSE") => Ok(false),
            _ => Err(bad("not TRUE or FALSE".into())),
        };
        match key {
            "guid" => s.guid = Some(number()?).filter(|&g| g != 0),
            "sm_priority" => s.priority = Some(ranged(0, 15)? as u8),
            "sm_key" => s.sm_key = Some(number()?),
            "sa_key" => s.sa_key = Some(number()?),
            "sm_assigned_guid" => s.sm_assigned_guid = Some(ranged(0, 255)? as u8),
            "lmc" => s.lmc = Some(ranged(0, 7)? as u8),
            "lmc_esp0" => s.lmc_esp0 = Some(boolean()?),
            "connect_roots" => s.connect_roots = Some(boolean()?),
            "lash_start_vl" => s.lash_start_vl = Some(ranged(0, 14)? as u8),
            "no_clients_rereg" => s.no_clients_rereg = Some(boolean()?),
            "root_guid_file" if null => {}
            "fsync_high_avail_files" => s.fsync_high_avail_files = Some(boolean()?),
            "node_name_map_name" if null => {}
            "node_name_map_name" => s.node_name_map = Some(PathBuf::from(value)),
            "root_guid_file" => s.root_guid_file = Some(PathBuf::from(value)),
            "lfts_file" if null => {}
            "guid_routing_order_file" if null => {}
            "guid_routing_order_file" => s.guid_routing_order_file = Some(PathBuf::from(value)),
            "guid_routing_order_no_scatter" => s.guid_routing_order_no_scatter = Some(boolean()?),
            "hop_weights_file" if null => {}
            "hop_weights_file" => s.hop_weights_file = Some(PathBuf::from(value)),
            "port_search_ordering_file" if null => {}
            "port_search_ordering_file" => s.port_search_ordering_file = Some(PathBuf::from(value)),
            "port_shifting" => s.port_shifting = Some(boolean()?),
            "port_profile_switch_nodes" => s.port_profile_switch_nodes = Some(boolean()?),
            "port_prof_ignore_file" if null => {}
            "port_prof_ignore_file" => s.port_prof_ignore_file = Some(PathBuf::from(value)),
            "scatter_ports" => s.scatter_ports = Some(ranged(0, 0xFFFF_FFFF)? as u32),
            "lfts_file" => s.lfts_file = Some(PathBuf::from(value)),
            "subnet_prefix" => s.subnet_prefix = Some(number()?),
            "part_enforce" => {
                s.part_enforce = Some(
                    PartEnforce::from_opensm(value)
                        .ok_or_else(|| bad("not both, in, out or off".into()))?,
                )
            }
            "no_partition_enforcement" => no_enforcement = boolean()?,
            "allow_both_pkeys" => s.allow_both_pkeys = Some(boolean()?),
            "keep_pkey_indexes" => s.keep_pkey_indexes = Some(boolean()?),
            "honor_guid2lid_file" => s.honor_guid2lid_file = Some(boolean()?),
            "sweep_on_trap" => s.sweep_on_trap = Some(boolean()?),
            "ignore_other_sm" => s.ignore_other_sm = Some(boolean()?),
            "sm_inactive" => s.sm_inactive = Some(boolean()?),
            "disable_multicast" => s.disable_multicast = Some(boolean()?),
            "mcgroup_join_validation" => s.mcgroup_join_validation = Some(boolean()?),
            "use_mfttop" => s.use_mfttop = Some(boolean()?),
            "babbling_port_policy" => s.babbling_port_policy = Some(boolean()?),
            "use_optimized_slvl" => s.use_optimized_slvl = Some(boolean()?),
            "drop_event_subscriptions" => s.drop_event_subscriptions = Some(boolean()?),
            "consolidate_ipv6_snm_req" => s.consolidate_ipv6_snm_req = Some(boolean()?),
            "use_original_extended_sa_rates_only" => {
                s.use_original_extended_sa_rates_only = Some(boolean()?)
            }
            // OpenSM 3.3.24's: 2-24, or 63 for none (OpenSM takes 63 for
            // another; ibkit refuses it).
            "max_rate_enum" => {
                s.max_rate_enum = match number()? {
                    x @ (2..=24 | 63) => Some(x as u8),
                    _ => return Err(bad("not 2-24 or 63".into())),
                }
            }
            "ipoib_mcgroup_creation_validation" => {
                s.ipoib_mcgroup_creation_validation = Some(boolean()?)
            }
            "reassign_lids" => s.reassign_lids = Some(boolean()?),
            "force_heavy_sweep" => s.force_heavy_sweep = Some(boolean()?),
            "sweep_interval" => {
                s.sweep_ms = Some(ranged(0, 86_400)? * 1000);
                sweep_line = line;
            }
            "m_key" => s.m_key = Some(number()?),
            "m_key_lookup" => s.m_key_lookup = Some(boolean()?),
            // Newer OpenSMs' option (3.3.23 has none): ibkit's own
            // derivation of each port's key.
            "m_key_per_port" => s.m_key_per_port = Some(boolean()?),
            "subnet_timeout" => s.subnet_timeout = Some(ranged(0, 31)? as u8),
            "head_of_queue_lifetime" => s.head_of_queue_lifetime = Some(ranged(0, 31)? as u8),
            "leaf_head_of_queue_lifetime" => {
                s.leaf_head_of_queue_lifetime = Some(ranged(0, 31)? as u8)
            }
            "vl_stall_count" => s.vl_stall_count = Some(ranged(0, 7)? as u8),
            "leaf_vl_stall_count" => s.leaf_vl_stall_count = Some(ranged(0, 7)? as u8),
            "max_op_vls" => s.max_op_vls = Some(ranged(1, 5)? as u8),
            "local_phy_errors_threshold" => {
                s.local_phy_errors_threshold = Some(ranged(0, 15)? as u8)
            }
            "overrun_errors_threshold" => s.overrun_errors_threshold = Some(ranged(0, 15)? as u8),
            "packet_life_time" => s.packet_life_time = Some(ranged(0, 31)? as u8),
            "sm_sl" => s.sm_sl = Some(ranged(0, 15)? as u8),
            "force_link_width" => s.force_link_width = Some(link_code(31, &[255])?),
            "force_link_speed" => s.force_link_speed = Some(link_code(7, &[15])?),
            "force_link_speed_ext" => s.force_link_speed_ext = Some(link_code(15, &[30, 31])?),
            "m_key_protection_level" => s.m_key_protection_level = Some(ranged(0, 3)? as u8),
            "m_key_lease_period" => {
                s.m_key_lease_period = Some(ranged(0, 65_535)? as u16);
                lease_line = line;
            }
            "sminfo_polling_timeout" => s.poll_ms = Some(ranged(10, 3_600_000)?),
            "polling_retry_number" => s.poll_retries = Some(ranged(0, 1_000)? as u32),
            "transaction_timeout" => s.timeout_ms = Some(ranged(10, 10_000)?),
            "transaction_retries" => s.retries = Some(ranged(0, 20)? as u32),
            "long_transaction_timeout" => s.long_timeout_ms = Some(ranged(0, 3_600_000)?),
            // OpenSM reads 0 as no limit, as ibkit does.
            "max_wire_smps" => s.max_wire_smps = Some(ranged(0, 0x7FFF_FFFF)? as u32),
            // Above max_wire_smps, a window stuck full grows by one each
            // max_smps_timeout (µs) without an answer, in both SMs.
            "max_wire_smps2" => s.max_wire_smps2 = Some(ranged(0, 0x7FFF_FFFF)? as u32),
            "max_smps_timeout" => s.max_smps_timeout = Some(ranged(0, 0xFFFF_FFFF)? as u32),
            "routing_engine" if null => {}
            "routing_engine" => {
                let names: Vec<&str> = value.split(',').map(str::trim).collect();
                let first = names
                    .iter()
                    .find_map(|n| Engine::from_name(n).map(|e| (n, e)));
                for n in names
                    .iter()
                    .take_while(|n| Some(**n) != first.map(|f| *f.0))
                {
                    notes.push(Note {
                        line,
                        warning: true,
                        text: format!(
                            "routing_engine: ibkit has no {n:?} engine (minhop, updn, ftree, file, dor, lash)"
                        ),
                    });
                }
                // A file that does not fit: OpenSM tries the next engine
                // of the list; so does ibkit, the next it has.
                if first.is_some_and(|f| f.1 == Engine::File) {
                    let rest = (names.iter())
                        .skip_while(|n| Some(**n) != first.map(|f| *f.0))
                        .skip(1);
                    for n in rest {
                        match Engine::from_name(n).filter(|&e| e != Engine::File) {
                            Some(e) => {
                                s.file_fallback = Some(e);
                                break;
                            }
                            None => notes.push(Note {
                                line,
                                warning: true,
                                text: format!(
                                    "routing_engine: ibkit has no {n:?} engine to try after file (minhop, updn, ftree, dor, lash)"
                                ),
                            }),
                        }
                    }
                }
                // OpenSM falls back to minhop when no engine of the list
                // routes the subnet; so does ibkit.
                s.routing = Some(first.map_or(Engine::MinHop, |f| f.1));
            }
            "partition_config_file" if null => {}
            "partition_config_file" => partitions = Some((line, PathBuf::from(value))),
            "qos" => s.qos = Some(boolean()?),
            "qos_policy_file" if null => {}
            "qos_policy_file" => qos_policy = Some((line, PathBuf::from(value))),
            "log_file" if null => {}
            "accum_log_file" => s.accum_log_file = Some(boolean()?),
            "log_max_size" => s.log_max_size = Some(ranged(0, 1_048_576)? as u32),
            "log_prefix" if null => {}
            "log_prefix" => s.log_prefix = Some(crate::config::log_prefix(value).map_err(bad)?),
            // ibkit writes every line to the file as it logs it, with
            // nothing held in a buffer: what `TRUE` asks, whatever the
            // value says.
            "force_log_flush" => {
                boolean()?;
            }
            "log_file" => s.log_file = Some(PathBuf::from(value)),
            "log_flags" => log_flags = Some(ranged(0, 0xFF)? as u8),
            "dump_files_dir" if null => {}
            "dump_files_dir" => dump_dir = Some(PathBuf::from(value)),
            "sa_db_dump" => sa_db_dump = boolean()?,
            "sa_db_file" if null => {}
            "sa_db_file" => s.sa_db_file = Some(PathBuf::from(value)),
            k if k.starts_with("qos_") => {} // the QoS reader's (qos_config)
            _ => match WARN_UNLESS.iter().find(|w| w.0 == key) {
                Some((_, default, instead)) if !value.eq_ignore_ascii_case(default) => {
                    notes.push(Note {
                        line,
                        warning: true,
                        text: format!("{key} {value}: not applied; {instead}"),
                    });
                }
                _ => {
                    if skipped.len() < 256 {
                        skipped.push(key);
                    }
                }
            },
        }
    }
    // OpenSM's older switch, where set, wins over `part_enforce`.
    if no_enforcement {
        s.part_enforce = Some(PartEnforce::Off);
    }
    // OpenSM keeps its sweeps within a protected M_Key's lease: no
    // periodic sweep becomes one a second short of the lease (none, for a
    // lease of a second), then a lease no longer than the sweep interval
    // becomes a second longer than it.
    let lease = u64::from(s.m_key_lease_period.unwrap_or(0));
    if s.m_key_protection_level.unwrap_or(0) != 0 && lease != 0 {
        let mut sweep = s.sweep_ms.unwrap_or(10_000) / 1000;
        if sweep == 0 {
            sweep = lease - 1;
            s.sweep_ms = Some(sweep * 1000);
            notes.push(Note {
                line: sweep_line,
                warning: false,
                text: format!(
                    "sweep_interval 0 with a protected M_Key's lease of {lease} s: sweeping every {sweep} s, as OpenSM"
                ),
            });
        }
        if sweep != 0 && sweep >= lease {
            let longer = (sweep + 1).min(65_535) as u16;
            s.m_key_lease_period = Some(longer);
            notes.push(Note {
                line: lease_line,
                warning: false,
                text: format!(
                    "m_key_lease_period {lease}: not longer than sweep_interval {sweep}; {longer} s, as OpenSM"
                ),
            });
        }
    }
    // Where OpenSM writes its dumps (its default when the file names
    // none), and which: opensm-subnet.lst at every sweep whatever the log
    // says; the routing dumps under ROUTING; the SA's database under
    // VERBOSE or sa_db_dump (osm_dump_all and the state manager).
    let dumps = dump_dir.unwrap_or_else(|| PathBuf::from("/var/log/"));
    let flags = log_flags.unwrap_or(0x03);
    s.subnet_lst_dir = Some(dumps.clone());
    if flags & 0x40 != 0 {
        s.dump_dir = Some(dumps.clone());
    }
    if sa_db_dump || flags & 0x04 != 0 {
        s.sa_db_dump_dir = Some(dumps);
    }
    if let Some(f) = log_flags {
        // OpenSM's log flags: ERROR 0x01, INFO 0x02, VERBOSE 0x04, DEBUG
        // 0x08, FUNCS 0x10, FRAMES 0x20, ROUTING 0x40, SYS 0x80.
        s.log_level = Some(
            if f & 0x3C != 0 {
                "debug"
            } else if f & 0x02 != 0 {
                "info"
            } else {
                "error"
            }
            .to_string(),
        );
    }
    // A file the configuration names is taken only where it is there;
    // else, as OpenSM, the SM goes on without it, and says so.
    let mut present = |named: Option<(usize, PathBuf)>, key: &str, without: &str| {
        let (line, p) = named?;
        if exists(&p) {
            return Some(p);
        }
        notes.push(Note {
            line,
            warning: false,
            text: format!("{key} {}: not there; {without}", p.display()),
        });
        None
    };
    s.partitions = present(
        partitions,
        "partition_config_file",
        "the default partition only, as OpenSM",
    );
    if s.qos == Some(true) {
        s.qos_config = Some(file.to_path_buf());
        s.qos_policy = present(qos_policy, "qos_policy_file", "no QoS policy");
    }
    if !skipped.is_empty() {
        notes.push(Note {
            line: 0,
            warning: false,
            text: format!(
                "{} option(s) not applied (OpenSM's, with no ibkit setting): {}",
                skipped.len(),
                skipped.join(" ")
            ),
        });
    }
    Ok(OpensmConf { settings: s, notes })
}

/// A number as C's `strtoul` with base 0 reads it, the whole value:
/// `0x` hex, a leading `0` octal, else decimal.
fn c_number(v: &str) -> Option<u64> {
    if let Some(h) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if v.len() > 1 && v.starts_with('0') {
        u64::from_str_radix(&v[1..], 8).ok()
    } else {
        v.parse().ok()
    }
}

/// The most GUIDs [`parse_node_guids`] takes.
pub const MAX_NODE_GUIDS: usize = 65_536;

/// A file of node GUIDs as OpenSM reads its `root_guid_file`: one a line,
/// as C's `strtoull` base 0 reads it (`0x` hex, leading-zero octal,
/// decimal), after optional blanks; the rest of the line (a node's name)
/// after a blank is ignored; blank lines and lines starting with `#` are
/// skipped. A line that does not start with a number, or whose number
/// runs into other characters, is refused with its place, as OpenSM
/// refuses the file; so are GUID 0 and more than [`MAX_NODE_GUIDS`].
pub fn parse_node_guids(text: &str) -> Result<Vec<u64>, ConfigError> {
    let mut guids = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let body = raw.trim_start();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let end = body
            .find(|c: char| c.is_whitespace() || c == '#')
            .unwrap_or(body.len());
        let word = &body[..end];
        let bad = |reason: String| ConfigError {
            line: i + 1,
            column: raw.len() - body.len() + 1,
            reason,
        };
        let shown = format!("{:?}", word.chars().take(40).collect::<String>());
        let guid = c_number(word).ok_or_else(|| bad(format!("{shown}: not a GUID")))?;
        if guid == 0 {
            return Err(bad("GUID 0 names no node".into()));
        }
        if guids.len() == MAX_NODE_GUIDS {
            return Err(bad(format!("more than {MAX_NODE_GUIDS} GUIDs")));
        }
        guids.push(guid);
    }
    Ok(guids)
}

/// The lines of a file keyed by switch GUID, as OpenSM reads its
/// `hop_weights_file` and `port_search_ordering_file` (its
/// `parse_node_map`): blank lines and lines starting with `#` skipped,
/// a GUID first (C's `strtoull` base 0), then words up to a `#`. Each
/// line's GUID and its words with their columns (the GUID's first) go to
/// `each`; a GUID
/// that does not read, GUID 0, or more than [`MAX_NODE_GUIDS`] lines is
/// refused with its place.
fn switch_lines(
    text: &str,
    mut each: impl FnMut(
        u64,
        &[(usize, &str)],
        &dyn Fn(usize, String) -> ConfigError,
    ) -> Result<(), ConfigError>,
) -> Result<(), ConfigError> {
    let mut count = 0;
    for (i, raw) in text.lines().enumerate() {
        let body = raw.split('#').next().unwrap_or("");
        let mut words = Vec::new();
        let mut rest = body;
        while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
            let end = rest[start..]
                .find(char::is_whitespace)
                .map_or(rest.len(), |e| start + e);
            let column = body.len() - rest.len() + start + 1;
            words.push((column, &rest[start..end]));
            rest = &rest[end..];
        }
        let Some(&(column, word)) = words.first() else {
            continue;
        };
        let bad = |column: usize, reason: String| ConfigError {
            line: i + 1,
            column,
            reason,
        };
        let shown = format!("{:?}", word.chars().take(40).collect::<String>());
        let guid = c_number(word).ok_or_else(|| bad(column, format!("{shown}: not a GUID")))?;
        if guid == 0 {
            return Err(bad(column, "GUID 0 names no switch".into()));
        }
        if count == MAX_NODE_GUIDS {
            return Err(bad(column, format!("more than {MAX_NODE_GUIDS} lines")));
        }
        count += 1;
        each(guid, &words, &bad)?;
    }
    Ok(())
}

/// A number of a line of [`switch_lines`] within `lo..=hi`, or why not.
fn ranged_word(
    (column, word): (usize, &str),
    what: &str,
    lo: u64,
    hi: u64,
    bad: &dyn Fn(usize, String) -> ConfigError,
) -> Result<u8, ConfigError> {
    let shown = format!("{:?}", word.chars().take(40).collect::<String>());
    match c_number(word) {
        Some(v) if (lo..=hi).contains(&v) => Ok(v as u8),
        Some(_) => Err(bad(column, format!("{what} {shown}: not in {lo}-{hi}"))),
        None => Err(bad(column, format!("{what} {shown}: not a number"))),
    }
}

/// OpenSM's `hop_weights_file`: `SWITCH_GUID PORT WEIGHT` a line, the
/// weight of a hop out of that port (1-255; every other hop weighs 1),
/// `#` comments. A line that does not read, a port 0 or above 254, a
/// weight 0 or above 255, or anything after the weight is refused with
/// its place (OpenSM skips such a line).
pub fn parse_hop_weights(text: &str) -> Result<Vec<(u64, u8, u8)>, ConfigError> {
    let mut out = Vec::new();
    switch_lines(text, |guid, words, bad| {
        let end = |w: &[(usize, &str)]| w.last().map_or(1, |&(c, s)| c + s.len());
        match words {
            [_, port, weight] => {
                let port = ranged_word(*port, "port", 1, 254, bad)?;
                let weight = ranged_word(*weight, "weight", 1, 255, bad)?;
                out.push((guid, port, weight));
                Ok(())
            }
            [_, _, _, (column, _), ..] => Err(bad(*column, "more than a port and a weight".into())),
            _ => Err(bad(end(words), "a port and a weight expected".into())),
        }
    })?;
    Ok(out)
}

/// OpenSM's `port_prof_ignore_file`: `SWITCH_GUID PORT` a line, a port
/// whose routes never count in its load, `#` comments. A line that does
/// not read, a port 0 or above 254, or anything after the port is
/// refused with its place (OpenSM reads the first number and skips the
/// rest).
pub fn parse_port_prof_ignore(text: &str) -> Result<Vec<(u64, u8)>, ConfigError> {
    let mut out = Vec::new();
    switch_lines(text, |guid, words, bad| match words {
        [_, port] => {
            out.push((guid, ranged_word(*port, "port", 1, 254, bad)?));
            Ok(())
        }
        [_, _, (column, _), ..] => Err(bad(*column, "more than a port".into())),
        [(column, g)] => Err(bad(column + g.len(), "a port expected".into())),
        [] => Ok(()),
    })?;
    Ok(out)
}

/// OpenSM's `port_search_ordering_file`: `SWITCH_GUID PORT...` a line,
/// the order the switch's ports are tried in (the ports not named after
/// them, ascending), `#` comments. A line with no port, a port 0 or above
/// 254, or a port named twice is refused with its place (OpenSM skips
/// such a line).
pub fn parse_port_search_order(text: &str) -> Result<Vec<(u64, Vec<u8>)>, ConfigError> {
    let mut out = Vec::new();
    switch_lines(text, |guid, words, bad| {
        let mut ports = Vec::new();
        for &w in &words[1..] {
            let p = ranged_word(w, "port", 1, 254, bad)?;
            if ports.contains(&p) {
                return Err(bad(w.0, format!("port {p} named twice")));
            }
            ports.push(p);
        }
        if ports.is_empty() {
            let (column, guid) = words[0];
            return Err(bad(column + guid.len(), "no port named".into()));
        }
        out.push((guid, ports));
        Ok(())
    })?;
    Ok(out)
}

/// Reads and parses the `opensm.conf` at `path` (bounded in size).
pub fn read_opensm_conf(path: &Path) -> Result<OpensmConf, crate::SmdError> {
    let bad = |why: String| crate::SmdError::Config(format!("{}: {why}", path.display()));
    let text = crate::read_bounded(path).map_err(bad)?;
    parse_opensm_conf(&text, path, &|p: &Path| p.is_file()).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<OpensmConf, ConfigError> {
        parse_opensm_conf(text, Path::new("/etc/opensm/opensm.conf"), &|p: &Path| {
            p.starts_with("/there")
        })
    }

    #[test]
    fn sa_db_dump_writes_the_sa_database_into_dump_files_dir() {
        let dir = |text: &str| parse(text).unwrap().settings;
        // Whatever log_flags says; into dump_files_dir, or OpenSM's
        // default there.
        let s = dir("log_flags 0x03\ndump_files_dir /srv/osm\nsa_db_dump TRUE\n");
        assert_eq!(s.sa_db_dump_dir.as_deref(), Some(Path::new("/srv/osm")));
        assert_eq!(s.dump_dir, None);
        let s = dir("sa_db_dump TRUE\ndump_files_dir (null)\n");
        assert_eq!(s.sa_db_dump_dir.as_deref(), Some(Path::new("/var/log/")));
        let s = dir("sa_db_dump FALSE\ndump_files_dir /srv/osm\n");
        assert_eq!(s.sa_db_dump_dir, None);
        // ROUTING: every dump there.
        let s = dir("log_flags 0x43\ndump_files_dir /srv/osm\n");
        assert_eq!(s.dump_dir.as_deref(), Some(Path::new("/srv/osm")));
        assert_eq!(s.sa_db_dump_dir, None);
        let s = dir("log_flags 0x07\n");
        assert_eq!(s.dump_dir, None);
        assert_eq!(s.sa_db_dump_dir.as_deref(), Some(Path::new("/var/log/")));
        let e = parse("sa_db_dump yes\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        assert!(e.reason.contains("not TRUE or FALSE"), "{e}");
    }

    #[test]
    fn what_ibkit_applies_is_read_with_opensms_syntax() {
        let c = parse(
            "# a site's file\nguid 0x0002c90300001234\nsm_priority 7\nsm_key 0x2a\nsa_key 42\n\
             lmc 2\nlmc_esp0 TRUE\nconnect_roots TRUE\nlash_start_vl 3\nreassign_lids FALSE\nforce_heavy_sweep TRUE\nsweep_interval 30\n\
             sminfo_polling_timeout 2000\ntransaction_timeout 0310\ntransaction_retries 5\nlong_transaction_timeout 0x3e8\n\
             routing_engine dfsssp,ftree,updn\npartition_config_file /there/p.conf\n\
             qos TRUE\nqos_policy_file /there/q.conf\nqos_max_vls 8\nlog_file /var/log/sm.log\n\
             log_flags 0x03\ndump_files_dir /var/log/\nsa_db_file (null)\nsm_assigned_guid 0x07\n\
             subnet_timeout 17\nhead_of_queue_lifetime 0x13\nleaf_head_of_queue_lifetime 0x0f\n\
             vl_stall_count 6\nleaf_vl_stall_count 5\nmax_op_vls 3\nlocal_phy_errors_threshold 9\n\
             overrun_errors_threshold 0xa\npacket_life_time 0x13\nsm_sl 3\n\
             force_link_width 0x1\nforce_link_speed 3\nforce_link_speed_ext 30\n\
             no_clients_rereg TRUE\nsubnet_prefix 0xfec0000000000001\n\
             root_guid_file /there/roots\nlfts_file /there/lfts\nguid_routing_order_file /there/order\nguid_routing_order_no_scatter TRUE\nhop_weights_file /there/weights\nport_search_ordering_file (null)\nport_shifting TRUE\nscatter_ports 0x10\nport_profile_switch_nodes TRUE\nport_prof_ignore_file /there/ignore\nnode_name_map_name /there/names\nfsync_high_avail_files FALSE\npart_enforce in\nallow_both_pkeys TRUE\nkeep_pkey_indexes FALSE\nconsolidate_ipv6_snm_req TRUE\nuse_original_extended_sa_rates_only TRUE\nmax_rate_enum 16\nhonor_guid2lid_file TRUE\nsweep_on_trap FALSE\nignore_other_sm TRUE\nsm_inactive TRUE\ndisable_multicast TRUE\n\
             mcgroup_join_validation FALSE\nipoib_mcgroup_creation_validation FALSE\nuse_mfttop FALSE\nbabbling_port_policy TRUE\nuse_optimized_slvl FALSE\n\
             drop_event_subscriptions TRUE\n\
             polling_retry_number 4\nmax_wire_smps 12\naccum_log_file FALSE\nlog_max_size 0x10\n",
        )
        .unwrap();
        let s = &c.settings;
        assert_eq!(s.guid, Some(0x0002_c903_0000_1234));
        assert_eq!(
            (s.priority, s.sm_key, s.sa_key),
            (Some(7), Some(42), Some(42))
        );
        assert_eq!(
            (s.lmc, s.lmc_esp0, s.reassign_lids),
            (Some(2), Some(true), Some(false))
        );
        assert_eq!(s.connect_roots, Some(true));
        assert_eq!(s.lash_start_vl, Some(3));
        assert_eq!(s.force_heavy_sweep, Some(true));
        assert_eq!(s.no_clients_rereg, Some(true));
        assert_eq!(s.subnet_prefix, Some(0xfec0_0000_0000_0001));
        assert_eq!(s.root_guid_file, Some(PathBuf::from("/there/roots")));
        assert_eq!(s.lfts_file, Some(PathBuf::from("/there/lfts")));
        assert_eq!(
            s.guid_routing_order_file,
            Some(PathBuf::from("/there/order"))
        );
        assert_eq!(s.guid_routing_order_no_scatter, Some(true));
        assert_eq!(s.hop_weights_file, Some(PathBuf::from("/there/weights")));
        assert_eq!(s.port_search_ordering_file, None);
        assert_eq!((s.port_shifting, s.scatter_ports), (Some(true), Some(16)));
        assert_eq!(s.port_profile_switch_nodes, Some(true));
        assert_eq!(
            s.port_prof_ignore_file,
            Some(PathBuf::from("/there/ignore"))
        );
        assert_eq!(s.node_name_map, Some(PathBuf::from("/there/names")));
        assert_eq!(s.fsync_high_avail_files, Some(false));
        assert_eq!(s.part_enforce, Some(PartEnforce::In));
        assert_eq!(s.allow_both_pkeys, Some(true));
        assert_eq!(s.keep_pkey_indexes, Some(false));
        assert_eq!(s.consolidate_ipv6_snm_req, Some(true));
        assert_eq!(s.use_original_extended_sa_rates_only, Some(true));
        assert_eq!(s.max_rate_enum, Some(16));
        assert_eq!(s.honor_guid2lid_file, Some(true));
        assert_eq!(s.sweep_on_trap, Some(false));
        assert_eq!(s.ignore_other_sm, Some(true));
        assert_eq!(s.sm_inactive, Some(true));
        assert_eq!(s.disable_multicast, Some(true));
        assert_eq!(s.mcgroup_join_validation, Some(false));
        assert_eq!(s.ipoib_mcgroup_creation_validation, Some(false));
        assert_eq!(s.use_mfttop, Some(false));
        assert_eq!(s.babbling_port_policy, Some(true));
        assert_eq!(s.use_optimized_slvl, Some(false));
        assert_eq!(s.drop_event_subscriptions, Some(true));
        assert_eq!(s.poll_retries, Some(4));
        assert_eq!(s.max_wire_smps, Some(12));
        assert_eq!((s.accum_log_file, s.log_max_size), (Some(false), Some(16)));
        // The older switch wins over part_enforce, before it or after.
        for text in [
            "no_partition_enforcement TRUE\npart_enforce out\n",
            "part_enforce both\nno_partition_enforcement TRUE\n",
        ] {
            assert_eq!(
                parse(text).unwrap().settings.part_enforce,
                Some(PartEnforce::Off)
            );
        }
        let out = parse("no_partition_enforcement FALSE\npart_enforce out\n").unwrap();
        assert_eq!(out.settings.part_enforce, Some(PartEnforce::Out));
        assert_eq!((s.sweep_ms, s.poll_ms), (Some(30_000), Some(2000)));
        assert_eq!(
            (s.timeout_ms, s.retries),
            (Some(200), Some(5)),
            "0310 is octal"
        );
        assert_eq!(s.long_timeout_ms, Some(1000));
        assert_eq!(s.routing, Some(Engine::FatTree));
        assert_eq!(s.partitions.as_deref(), Some(Path::new("/there/p.conf")));
        assert_eq!(s.qos, Some(true));
        assert_eq!(
            s.qos_config.as_deref(),
            Some(Path::new("/etc/opensm/opensm.conf"))
        );
        assert_eq!(s.qos_policy.as_deref(), Some(Path::new("/there/q.conf")));
        assert_eq!(s.log_file.as_deref(), Some(Path::new("/var/log/sm.log")));
        assert_eq!(s.log_level.as_deref(), Some("info"));
        assert_eq!(s.dump_dir, None, "0x03 has no ROUTING");
        assert_eq!(s.sa_db_file, None);
        assert_eq!(s.sa_db_dump_dir, None, "no sa_db_dump, no VERBOSE");
        assert_eq!(
            s.subnet_lst_dir.as_deref(),
            Some(Path::new("/var/log/")),
            "opensm-subnet.lst whatever log_flags says"
        );
        assert_eq!(s.sm_assigned_guid, Some(7));
        assert_eq!(s.subnet_timeout, Some(17));
        assert_eq!(
            s.link_params(),
            smi::sm::LinkParams {
                hoq_lifetime: 0x13,
                leaf_hoq_lifetime: 0x0f,
                vl_stall_count: 6,
                leaf_vl_stall_count: 5,
                max_op_vls: 3,
                local_phy_errors_threshold: 9,
                overrun_errors_threshold: 10,
                packet_life_time: 0x13,
                sm_sl: 3,
                force_link_width: 1,
                force_link_speed: 3,
                force_link_speed_ext: 30,
            }
        );
        let warned: Vec<&str> = c
            .notes
            .iter()
            .filter(|n| n.warning)
            .map(|n| n.text.as_str())
            .collect();
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(warned[0].contains("dfsssp"), "{warned:?}");
    }

    /// `routing_engine file,updn`: the file engine, and up*/down* where
    /// the file does not fit, as OpenSM tries the next engine; an engine
    /// ibkit lacks is warned and skipped; `file` alone falls back on
    /// min-hop, OpenSM's default.
    #[test]
    fn the_file_engine_and_what_follows_it() {
        let read =
            |text: &str| parse_opensm_conf(text, Path::new("/x/opensm.conf"), &|_| true).unwrap();
        let warned = |c: &OpensmConf| -> Vec<String> {
            (c.notes.iter())
                .filter(|n| n.warning)
                .map(|n| n.text.clone())
                .collect()
        };
        let c = read("routing_engine file,updn\nlfts_file /x/lfts\n");
        assert_eq!(c.settings.routing, Some(Engine::File));
        assert_eq!(c.settings.file_fallback, Some(Engine::UpDown));
        assert_eq!(c.settings.lfts_file, Some(PathBuf::from("/x/lfts")));
        assert!(warned(&c).is_empty(), "{:?}", c.notes);
        let c = read("routing_engine file,dfsssp,ftree,updn\n");
        assert_eq!(c.settings.file_fallback, Some(Engine::FatTree));
        let w = warned(&c);
        assert!(w.len() == 1 && w[0].contains("dfsssp"), "{w:?}");
        let c = read("routing_engine file,minhop\nlfts_file (null)\n");
        assert_eq!(c.settings.routing, Some(Engine::File));
        assert_eq!(c.settings.file_fallback, Some(Engine::MinHop));
        assert_eq!(c.settings.lfts_file, None);
        assert!(warned(&c).is_empty(), "{:?}", c.notes);
        let c = read("routing_engine file\n");
        assert_eq!(c.settings.file_fallback, None);
    }

    /// The M_Key options apply; a protected key's lease is kept longer
    /// than the sweep interval, as OpenSM keeps it; `sweep_interval 0`
    /// is no periodic sweep.
    #[test]
    fn the_m_key_and_its_lease_are_read_as_opensm_keeps_them() {
        let c = parse(
            "m_key 0x5ec2e7\nm_key_protection_level 1\nm_key_lease_period 60\nm_key_lookup FALSE\n",
        )
        .unwrap();
        assert_eq!(c.settings.m_key_lookup, Some(false));
        let s = &c.settings;
        assert_eq!(
            (s.m_key, s.m_key_protection_level, s.m_key_lease_period),
            (Some(0x5ec2e7), Some(1), Some(60))
        );
        assert!(
            c.notes.iter().all(|n| !n.text.contains("m_key")),
            "{:?}",
            c.notes
        );
        let c =
            parse("m_key 1\nm_key_protection_level 2\nm_key_lease_period 10\nsweep_interval 10\n")
                .unwrap();
        assert_eq!(c.settings.m_key_lease_period, Some(11));
        assert!(c
            .notes
            .iter()
            .any(|n| n.line == 3 && n.text.contains("11 s")));
        let c =
            parse("sweep_interval 0\nm_key_protection_level 1\nm_key_lease_period 30\n").unwrap();
        assert_eq!(c.settings.sweep_ms, Some(29_000));
        assert!(c
            .notes
            .iter()
            .any(|n| n.line == 1 && n.text.contains("every 29 s")));
        // Without protection, sweep_interval 0 is no periodic sweep.
        let c = parse("sweep_interval 0\nm_key_lease_period 30\n").unwrap();
        assert_eq!(
            (c.settings.sweep_ms, c.settings.m_key_lease_period),
            (Some(0), Some(30))
        );
    }

    #[test]
    fn octal_and_hex_are_read_as_strtoul_reads_them() {
        assert_eq!(c_number("010"), Some(8));
        assert_eq!(c_number("0x10"), Some(16));
        assert_eq!(c_number("10"), Some(10));
        assert_eq!(c_number("0"), Some(0));
        assert_eq!(c_number("09"), None);
        assert_eq!(c_number("ten"), None);
    }

    #[test]
    fn files_that_are_not_there_are_noted_and_left_out() {
        let c = parse(
            "partition_config_file /etc/opensm/partitions.conf\nqos FALSE\n\
             qos_policy_file /there/q.conf\nlog_flags 0x07\ndump_files_dir /var/log/\n",
        )
        .unwrap();
        let s = &c.settings;
        assert_eq!(s.partitions, None);
        assert_eq!(
            (s.qos, s.qos_config.as_ref(), s.qos_policy.as_ref()),
            (Some(false), None, None)
        );
        // VERBOSE: the SA's database and the subnet list, as OpenSM
        // writes them; no routing dumps without ROUTING.
        assert_eq!(s.dump_dir, None);
        assert_eq!(s.sa_db_dump_dir.as_deref(), Some(Path::new("/var/log/")));
        assert_eq!(s.subnet_lst_dir.as_deref(), Some(Path::new("/var/log/")));
        assert_eq!(s.log_level.as_deref(), Some("debug"));
        assert!(c
            .notes
            .iter()
            .any(|n| n.line == 1 && n.text.contains("default partition only")));
    }

    #[test]
    fn a_root_guid_file_reads_as_opensm_reads_it() {
        let text = "# roots\n0x0002c90300000400 spine-1\n\n  0x2c90300000500#two\n\
                    0200\n12\tdecimal\n";
        assert_eq!(
            parse_node_guids(text).unwrap(),
            vec![0x0002_c903_0000_0400, 0x0002_c903_0000_0500, 0o200, 12]
        );
        for (text, line, column, why) in [
            ("0x400\n  spine\n", 2, 3, "\"spine\": not a GUID"),
            ("0x40g\n", 1, 1, "not a GUID"),
            ("0x0\n", 1, 1, "GUID 0"),
            ("0x1_000\n", 1, 1, "not a GUID"),
            ("0x10000000000000000\n", 1, 1, "not a GUID"),
        ] {
            let e = parse_node_guids(text).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.reason.contains(why), "{text:?}: {e}");
        }
        let many: String = (1..=MAX_NODE_GUIDS as u64 + 1)
            .map(|g| format!("{g}\n"))
            .collect();
        let e = parse_node_guids(&many).unwrap_err();
        assert_eq!(e.line, MAX_NODE_GUIDS + 1);
        assert!(parse_node_guids("").unwrap().is_empty());
    }

    #[test]
    fn what_changes_the_subnet_and_is_not_applied_is_warned() {
        let c = parse("m_key_per_port TRUE\nsubnet_prefix 0xfe80000000000000\nperfmgr TRUE\nmax_msg_fifo_timeout 8\n").unwrap();
        let warned: Vec<(usize, &str)> = (c.notes.iter())
            .filter(|n| n.warning)
            .map(|n| (n.line, n.text.as_str()))
            .collect();
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(
            warned[0].0 == 3 && warned[0].1.contains("performance manager"),
            "{warned:?}"
        );
        assert_eq!(c.settings.m_key_per_port, Some(true), "applied");
        assert!(c
            .notes
            .iter()
            .any(|n| !n.warning && n.text.contains("max_msg_fifo_timeout")));
    }

    /// `max_wire_smps` is ibkit's window, 0 for none, as OpenSM reads it;
    /// `max_wire_smps2` and `max_smps_timeout` how it grows when stuck.
    #[test]
    fn max_wire_smps_is_the_window() {
        let c = parse("max_wire_smps 8\nmax_wire_smps2 8\n").unwrap();
        assert_eq!(c.settings.max_wire_smps, Some(8));
        assert!(!c.notes.iter().any(|n| n.warning), "{:?}", c.notes);
        let c = parse("max_wire_smps2 6\nmax_smps_timeout 1500\n").unwrap();
        assert_eq!(c.settings.max_wire_smps2, Some(6));
        assert_eq!(
            crate::stuck_ms(c.settings.max_smps_timeout),
            2,
            "1.5 ms, rounded up"
        );
        assert_eq!(crate::stuck_ms(None), 600, "OpenSM's default");
        assert!(c.notes.is_empty(), "{:?}", c.notes);
        let c = parse("max_wire_smps 0\nmax_wire_smps2 100\n").unwrap();
        assert_eq!(c.settings.max_wire_smps, Some(0), "no limit");
        assert!(!c.notes.iter().any(|n| n.warning), "{:?}", c.notes);
        for (text, column, why) in [
            ("max_wire_smps 2147483648\n", 15, "not 0-2147483647"),
            ("max_wire_smps -1\n", 15, "not a number"),
            ("max_wire_smps2 many\n", 16, "not a number"),
            ("max_smps_timeout 4294967296\n", 18, "not 0-4294967295"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!((e.line, e.column), (1, column), "{text:?}: {e}");
            assert!(e.reason.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_bad_value_ibkit_applies_is_refused_with_its_place() {
        for (text, line, column, why) in [
            ("sm_priority 16\n", 1, 13, "not 0-15"),
            ("\n  lmc eight\n", 2, 7, "not a number"),
            ("lmc_esp0 yes\n", 1, 10, "TRUE or FALSE"),
            ("sweep_interval 0x\n", 1, 16, "not a number"),
            ("transaction_timeout 5\n", 1, 21, "not 10-10000"),
            ("m_key_protection_level 4\n", 1, 24, "not 0-3"),
            ("m_key 0xg\n", 1, 7, "not a number"),
            ("m_key_lease_period 65536\n", 1, 20, "not 0-65535"),
            ("max_op_vls 6\n", 1, 12, "not 1-5"),
            ("leaf_vl_stall_count 8\n", 1, 21, "not 0-7"),
            ("part_enforce BOTH\n", 1, 14, "not both, in, out or off"),
            ("no_partition_enforcement 1\n", 1, 26, "TRUE or FALSE"),
            ("force_link_width 254\n", 1, 18, "not 0-31 or 255"),
            ("force_link_speed 8\n", 1, 18, "not 0-7 or 15"),
            ("force_link_speed_ext 16\n", 1, 22, "not 0-15 or 30 or 31"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.reason.contains(why), "{text:?}: {e}");
        }
        // Unknown options and values ibkit does not apply are no error.
        assert!(parse("no_such_option 1\nmax_msg_fifo_timeout lots\n").is_ok());
    }

    #[test]
    fn hop_weights_and_port_orders_read_as_opensm_writes_them() {
        let w = parse_hop_weights(
            "# switch port weight\n0x0002c90300000001 1 10\n  0x0002c90300000002\t 36 0xff # far\n\n",
        )
        .unwrap();
        assert_eq!(
            w,
            [
                (0x0002_c903_0000_0001, 1, 10),
                (0x0002_c903_0000_0002, 36, 255)
            ]
        );
        let o = parse_port_search_order("0x2 3 1 2 # leaf\n0x3 07\n").unwrap();
        assert_eq!(o, [(2, vec![3, 1, 2]), (3, vec![7])]);
        // Refused with the place and the reason.
        let refused = |r: Result<(), ConfigError>| r.unwrap_err();
        let w = |t: &str| refused(parse_hop_weights(t).map(drop));
        let o = |t: &str| refused(parse_port_search_order(t).map(drop));
        let e = w("0x2 1 10\n0x3 0 10\n");
        assert_eq!((e.line, e.column), (2, 5), "{e}");
        assert!(e.reason.contains("not in 1-254"), "{e}");
        let e = w("0x3 1 256\n");
        assert_eq!((e.line, e.column), (1, 7), "{e}");
        let e = w("0x3 1 0\n");
        assert!(e.reason.contains("weight"), "{e}");
        let e = w("0x3 1\n");
        assert_eq!((e.line, e.column), (1, 6), "{e}");
        let e = w("0x3 1 2 3\n");
        assert_eq!((e.line, e.column), (1, 9), "{e}");
        let e = w("switch 1 2\n");
        assert!(e.reason.contains("not a GUID"), "{e}");
        let e = w("0 1 2\n");
        assert!(e.reason.contains("GUID 0"), "{e}");
        let e = o("0x2 1 2 1\n");
        assert_eq!((e.line, e.column), (1, 9), "{e}");
        assert!(e.reason.contains("twice"), "{e}");
        let e = o("0x2 # none\n");
        assert_eq!((e.line, e.column), (1, 4), "{e}");
        let e = o("0x2 1 x\n");
        assert!(e.reason.contains("not a number"), "{e}");
        let i = parse_port_prof_ignore("# anafa\n0x5 3 # internal\n").unwrap();
        assert_eq!(i, [(5, 3)]);
        let e = refused(parse_port_prof_ignore("0x5 3 4\n").map(drop));
        assert_eq!((e.line, e.column), (1, 7), "{e}");
        let e = refused(parse_port_prof_ignore("0x5\n").map(drop));
        assert_eq!((e.line, e.column), (1, 4), "{e}");
    }
}
