//! The running SM's VM control socket (`ibkit sm --vm-socket PATH`,
//! `ibkit vm`): what a cloud's compute agent asks of a vSwitch subnet —
//! start a VM on a hypervisor, live-migrate it (its LID and vGUID kept,
//! a few LFT entries swapped or copied), stop it, list them.
//!
//! One command a connection, one line each way: the request as words,
//! the answer as one JSON object, or `error: …`. The socket is a Unix
//! stream socket made mode 0600 and checked by the peer's credentials
//! (the SM's own user or root). A client is given a second to send its
//! line (at most 256 bytes); at most [`MAX_CLIENTS`] are served at once,
//! and the SM's loop never waits on one. A request that comes while the
//! SM is sweeping or sending a change is held until it is done (at most
//! [`HOLD`]), so that a VM is not refused for a sweep it could not see.

use serde::Serialize;
use smi::sm::{Sm, VmError, VmId};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest request line taken.
pub const MAX_LINE: usize = 256;
/// Clients served at once; more are answered `error: busy`.
pub const MAX_CLIENTS: usize = 4;
/// How long a client may take to send its line.
pub const CLIENT_WAIT: Duration = Duration::from_secs(1);
/// How long a request is held while the SM is busy (a sweep, a bring-up,
/// another change going out) before it is carried out anyway, and then
/// refused if the SM is still busy.
pub const HOLD: Duration = Duration::from_secs(3);

/// One request to the VM control socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VmCommand {
    /// `create PORT_GUID VGUID`: a VM with vGUID `vguid` on the
    /// hypervisor whose port GUID (or node GUID) is `hypervisor`.
    Create {
        /// The hypervisor's port GUID (the port of its vSwitch).
        hypervisor: u64,
        /// The VM's vGUID.
        vguid: u64,
    },
    /// `migrate VGUID PORT_GUID`: the VM live-migrated to that hypervisor.
    Migrate {
        /// The VM's vGUID.
        vguid: u64,
        /// The destination hypervisor's port GUID.
        to: u64,
    },
    /// `destroy VGUID`: the VM stopped, its VF freed.
    Destroy {
        /// The VM's vGUID.
        vguid: u64,
    },
    /// `list`: every running VM.
    List,
}

/// A request the socket refuses before it reaches the SM.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VmCtlError {
    /// Nothing but blanks.
    #[error("empty request (create, migrate, destroy, list)")]
    Empty,
    /// A verb it does not know.
    #[error("unknown command \"{0}\" (create, migrate, destroy, list)")]
    Unknown(String),
    /// Too few or too many words.
    #[error("{verb} takes {takes} argument(s): {usage}")]
    Words {
        /// The verb.
        verb: &'static str,
        /// How many it takes.
        takes: usize,
        /// Its usage.
        usage: &'static str,
    },
    /// A word that is not a GUID.
    #[error("\"{0}\" is not a GUID (hex, 0x optional, at most 16 digits)")]
    Guid(String),
    /// A GUID of zero names nothing.
    #[error("GUID 0 names no port or VM")]
    ZeroGuid,
    /// More than [`MAX_LINE`] bytes without a newline, or not UTF-8.
    #[error("request longer than {MAX_LINE} bytes or not text")]
    Line,
}

fn guid(word: &str) -> Result<u64, VmCtlError> {
    let bad = || VmCtlError::Guid(word.escape_debug().take(40).collect());
    let hex = word
        .strip_prefix("0x")
        .or_else(|| word.strip_prefix("0X"))
        .unwrap_or(word);
    if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    match u64::from_str_radix(hex, 16).map_err(|_| bad())? {
        0 => Err(VmCtlError::ZeroGuid),
        g => Ok(g),
    }
}

impl VmCommand {
    /// Reads a request line.
    pub fn parse(line: &str) -> Result<VmCommand, VmCtlError> {
        let words: Vec<&str> = line.split_whitespace().take(8).collect();
        let verb = *words.first().ok_or(VmCtlError::Empty)?;
        let (name, takes, usage): (&'static str, usize, &'static str) = match verb {
            "create" => ("create", 2, "create PORT_GUID VGUID"),
            "migrate" => ("migrate", 2, "migrate VGUID PORT_GUID"),
            "destroy" => ("destroy", 1, "destroy VGUID"),
            "list" => ("list", 0, "list"),
            v => return Err(VmCtlError::Unknown(v.escape_debug().take(40).collect())),
        };
        if words.len() != takes + 1 {
            return Err(VmCtlError::Words {
                verb: name,
                takes,
                usage,
            });
        }
        Ok(match name {
            "create" => VmCommand::Create {
                hypervisor: guid(words[1])?,
                vguid: guid(words[2])?,
            },
            "migrate" => VmCommand::Migrate {
                vguid: guid(words[1])?,
                to: guid(words[2])?,
            },
            "destroy" => VmCommand::Destroy {
                vguid: guid(words[1])?,
            },
            _ => VmCommand::List,
        })
    }
}

/// A running VM, as `create` and `list` answer.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct VmView {
    /// The SM's handle.
    pub vm: u32,
    /// Its vGUID (hex).
    pub vguid: String,
    /// Its LID, kept across migrations.
    pub lid: u16,
    /// Its hypervisor's port GUID (hex).
    pub hypervisor: String,
    /// The VF (1-based) it runs in.
    pub vf: u16,
}

/// What `migrate` answers.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct MigrationView {
    /// The VM after the move.
    #[serde(flatten)]
    pub vm: VmView,
    /// The hypervisor it left (port GUID, hex).
    pub from: String,
    /// The destination VF's own LID it swapped with (prepopulated LIDs).
    pub swapped_lid: Option<u16>,
    /// LFT entries changed.
    pub lft_entries: usize,
    /// Set(LinearForwardingTable) SMPs, one per block that changes.
    pub lft_blocks: usize,
    /// Switches updated.
    pub switches: usize,
}

fn hex(g: u64) -> String {
    format!("{g:#018x}")
}

fn view(sm: &Sm, id: VmId) -> Option<VmView> {
    let v = sm.vm(id)?;
    let port = sm.nodes().get(v.hypervisor)?.info.port_guid.0;
    Some(VmView {
        vm: id.0,
        vguid: hex(v.guid),
        lid: v.lid,
        hypervisor: hex(port),
        vf: v.vf,
    })
}

/// The hypervisor entry whose port GUID is `g`, or, for a node GUID, the
/// entry of the port the SM reached it by.
fn hypervisor(sm: &Sm, g: u64) -> Result<usize, String> {
    let guid = mad_core::Guid(g);
    match sm.subnet().by_gid_guid(guid) {
        Some((n, 0)) => Ok(n.0),
        Some(_) => Err(format!(
            "{} is a VM's vGUID, not a hypervisor's port",
            hex(g)
        )),
        None => (sm.subnet().by_guid(guid))
            .filter(|n| sm.nodes().get(n.0).is_some_and(|x| x.alive))
            .map(|n| n.0)
            .ok_or_else(|| format!("no live port or node has GUID {}", hex(g))),
    }
}

fn vm_by_guid(sm: &Sm, g: u64) -> Result<VmId, String> {
    (sm.vms().find(|(_, v)| v.guid == g).map(|(id, _)| id))
        .ok_or_else(|| format!("no VM has vGUID {}", hex(g)))
}

fn refused(e: VmError) -> String {
    e.to_string()
}

/// Carries out `cmd` on the SM: the answer line (JSON) or why not. A
/// refused command changes nothing.
pub fn apply(sm: &mut Sm, cmd: &VmCommand) -> Result<String, String> {
    let state = sm.sm_state();
    if *cmd != VmCommand::List && state != mad_core::attr::SmState::Master {
        return Err(format!(
            "this SM is {state:?}, not master: ask the master's VM socket"
        ));
    }
    match *cmd {
        VmCommand::Create {
            hypervisor: h,
            vguid,
        } => {
            let node = hypervisor(sm, h)?;
            let id = sm.create_vm(node, vguid).map_err(refused)?;
            let v = view(sm, id).ok_or("the VM vanished")?;
            tracing::info!(
                "VM {} (vGUID {}) started on {} VF {}, LID {}",
                v.vm,
                v.vguid,
                v.hypervisor,
                v.vf,
                v.lid
            );
            json(&v)
        }
        VmCommand::Migrate { vguid, to } => {
            let id = vm_by_guid(sm, vguid)?;
            let dst = hypervisor(sm, to)?;
            let from = view(sm, id).ok_or("the VM vanished")?.hypervisor;
            let plan = sm.plan_migration(id, dst).map_err(refused)?;
            sm.apply_migration(&plan, false).map_err(refused)?;
            let v = MigrationView {
                vm: view(sm, id).ok_or("the VM vanished")?,
                from,
                swapped_lid: plan.swapped_lid,
                lft_entries: plan.entries.len(),
                lft_blocks: plan.lft_smps(),
                switches: plan.switches.len(),
            };
            tracing::info!(
                "VM {} (vGUID {}) migrated from {} to {} VF {}, LID {} kept: {} LFT block(s) on {} switch(es)",
                v.vm.vm,
                v.vm.vguid,
                v.from,
                v.vm.hypervisor,
                v.vm.vf,
                v.vm.lid,
                v.lft_blocks,
                v.switches
            );
            json(&v)
        }
        VmCommand::Destroy { vguid } => {
            let id = vm_by_guid(sm, vguid)?;
            let v = view(sm, id).ok_or("the VM vanished")?;
            sm.destroy_vm(id).map_err(refused)?;
            tracing::info!("VM {} (vGUID {}) stopped", v.vm, v.vguid);
            json(&v)
        }
        VmCommand::List => {
            let all: Vec<VmView> = sm
                .vms()
                .map(|(id, _)| id)
                .collect::<Vec<_>>()
                .into_iter()
                .filter_map(|id| view(sm, id))
                .collect();
            json(&all)
        }
    }
}

fn json<T: Serialize>(v: &T) -> Result<String, String> {
    serde_json::to_string(v).map_err(|e| e.to_string())
}

struct Client {
    stream: UnixStream,
    line: Vec<u8>,
    /// When the stage it is in runs out.
    until: Instant,
    stage: Stage,
}

/// Where a client's request is.
enum Stage {
    /// Its line is being read.
    Reading,
    /// Read, and held while the SM is busy.
    Held(VmCommand),
    /// Carried out; its SMPs not all acknowledged yet.
    Applied {
        /// The answer.
        json: String,
        /// When it was carried out.
        since: Instant,
    },
}

/// The answer `json` (an object) with `in_place`: whether every SMP of
/// the change was acknowledged, and `in_place_ms`, how long after the
/// SM sent the first that was.
fn in_place(json: &str, ms: Option<f64>) -> String {
    let Ok(serde_json::Value::Object(mut m)) = serde_json::from_str(json) else {
        return json.to_string();
    };
    m.insert("in_place".into(), ms.is_some().into());
    if let Some(ms) = ms {
        m.insert(
            "in_place_ms".into(),
            ((ms * 1000.0).round() / 1000.0).into(),
        );
    }
    serde_json::Value::Object(m).to_string()
}

/// The SM is sweeping, bringing the subnet up or sending a change.
fn busy(sm: &Sm) -> bool {
    use smi::sm::Phase::*;
    matches!(
        sm.phase(),
        Discovery | LidAssignment | Distribution | Activation | Sweep
    )
}

/// The listening socket and the clients being read.
pub struct VmSocket {
    listener: UnixListener,
    path: PathBuf,
    clients: Vec<Client>,
    uid: u32,
}

impl VmSocket {
    /// Binds `path` (a stale socket file left there is replaced; any
    /// other file is refused), mode 0600.
    pub fn bind(path: &Path) -> Result<VmSocket, String> {
        use std::os::unix::fs::{FileTypeExt, PermissionsExt};
        let what = |e: std::io::Error| format!("VM socket {}: {e}", path.display());
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if !m.file_type().is_socket() {
                return Err(format!(
                    "VM socket {}: a file that is not a socket is there",
                    path.display()
                ));
            }
            if UnixStream::connect(path).is_ok() {
                return Err(format!(
                    "VM socket {}: another SM is listening there",
                    path.display()
                ));
            }
            std::fs::remove_file(path).map_err(what)?;
        }
        let listener = UnixListener::bind(path).map_err(what)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(what)?;
        listener.set_nonblocking(true).map_err(what)?;
        Ok(VmSocket {
            listener,
            path: path.to_path_buf(),
            clients: Vec::new(),
            uid: nix::unistd::getuid().as_raw(),
        })
    }

    /// Accepts and reads what has come, never waiting; each complete
    /// request is carried out on `sm` and answered. Returns how many were
    /// carried out (refused ones included).
    pub fn serve(&mut self, sm: &mut Sm, now: Instant) -> usize {
        while let Ok((stream, _)) = self.listener.accept() {
            self.admit(stream, now);
        }
        let mut done = 0;
        let mut i = 0;
        while i < self.clients.len() {
            if let Stage::Reading = self.clients[i].stage {
                match self.read(i, now) {
                    None => {
                        i += 1;
                        continue;
                    }
                    Some(Err(e)) => {
                        self.answer(i, Err(e));
                        continue;
                    }
                    Some(Ok(line)) => match VmCommand::parse(&line) {
                        Err(e) => {
                            self.answer(i, Err(e.to_string()));
                            continue;
                        }
                        Ok(cmd) => {
                            let c = &mut self.clients[i];
                            c.stage = Stage::Held(cmd);
                            c.until = now + HOLD;
                        }
                    },
                }
            }
            let c = &mut self.clients[i];
            match &c.stage {
                Stage::Held(cmd) if busy(sm) && *cmd != VmCommand::List && now < c.until => {
                    i += 1;
                }
                Stage::Held(cmd) => {
                    let cmd = cmd.clone();
                    done += 1;
                    match apply(sm, &cmd) {
                        Ok(json) if cmd != VmCommand::List && !sm.is_idle() => {
                            // Answered once the switches and hypervisors
                            // have acknowledged the change.
                            c.stage = Stage::Applied { json, since: now };
                            c.until = now + HOLD;
                            i += 1;
                        }
                        Ok(json) if cmd != VmCommand::List => {
                            self.answer(i, Ok(in_place(&json, Some(0.0))));
                        }
                        reply => self.answer(i, reply),
                    }
                }
                Stage::Applied { json, since } if sm.is_idle() || now >= c.until => {
                    let ms = sm
                        .is_idle()
                        .then(|| now.saturating_duration_since(*since).as_secs_f64() * 1e3);
                    let text = in_place(json, ms);
                    self.answer(i, Ok(text));
                }
                _ => i += 1,
            }
        }
        done
    }

    /// Writes client `i`'s answer and lets it go.
    fn answer(&mut self, i: usize, reply: Result<String, String>) {
        let mut c = self.clients.swap_remove(i);
        let text = match reply {
            Ok(json) => format!("{json}\n"),
            Err(e) => {
                tracing::warn!("VM socket: {e}");
                format!("error: {e}\n")
            }
        };
        read_away(&mut c.stream);
        // A short answer into an empty socket buffer; a client that does
        // not read it loses it.
        let _ = c.stream.write_all(text.as_bytes());
    }

    fn admit(&mut self, stream: UnixStream, now: Instant) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        // A refused client's line, if it has come, is read away first, as
        // in `answer`, so that it is not reset before it reads why.
        let refuse = |mut stream: UnixStream, why: String| {
            read_away(&mut stream);
            let _ = stream.write_all(why.as_bytes());
        };
        let who = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials);
        let uid = who.map(|c| c.uid()).unwrap_or(u32::MAX);
        if uid != self.uid && uid != 0 {
            tracing::warn!("VM socket: uid {uid} refused");
            refuse(
                stream,
                format!("error: permission denied: uid {uid} is not the SM's user or root\n"),
            );
            return;
        }
        if self.clients.len() >= MAX_CLIENTS {
            refuse(stream, "error: busy: try again\n".into());
            return;
        }
        self.clients.push(Client {
            stream,
            line: Vec::new(),
            until: now + CLIENT_WAIT,
            stage: Stage::Reading,
        });
    }

    /// Client `i`'s request once it is whole (`Ok`), or why it will not
    /// be (`Err`); `None` while it may still come.
    fn read(&mut self, i: usize, now: Instant) -> Option<Result<String, String>> {
        let c = &mut self.clients[i];
        let mut buf = [0u8; MAX_LINE + 1];
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    c.line.extend_from_slice(&buf[..n]);
                    if c.line.contains(&b'\n') || c.line.len() > MAX_LINE {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if now < c.until {
                        return None;
                    }
                    return Some(Err("no request within a second".into()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Some(Err(format!("reading the request: {e}"))),
            }
        }
        let end = c
            .line
            .iter()
            .position(|&b| b == b'\n')
            .unwrap_or(c.line.len());
        if end > MAX_LINE {
            return Some(Err(VmCtlError::Line.to_string()));
        }
        Some(
            std::str::from_utf8(&c.line[..end])
                .map(str::to_string)
                .map_err(|_| VmCtlError::Line.to_string()),
        )
    }
}

/// Reads away what a client sent that is not read yet (at most 64 KiB,
/// without waiting): closed with it unread, the socket would reset and
/// the client could lose its answer.
fn read_away(s: &mut UnixStream) {
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        if !matches!(s.read(&mut sink), Ok(n) if n > 0) {
            break;
        }
    }
}

impl Drop for VmSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Sends one request to an SM's VM socket and returns its answer line.
pub fn request(path: &Path, line: &str, wait: Duration) -> Result<String, String> {
    let what = |e: std::io::Error| format!("VM socket {}: {e}", path.display());
    let mut s = UnixStream::connect(path).map_err(what)?;
    s.set_read_timeout(Some(wait)).map_err(what)?;
    // An SM that refuses the connection at once (busy, not this user)
    // may close it before the line is written: its answer is read anyway.
    let sent = s.write_all(format!("{line}\n").as_bytes());
    let answer = read_answer(&mut s);
    match (answer, sent) {
        (Ok(a), _) if !a.is_empty() => Ok(a),
        (_, Err(e)) => Err(what(e)),
        (a, Ok(())) => a.map_err(what),
    }
}

/// The SM's answer line: what arrived before the end of the stream, or
/// before an error ending it (a reset after the answer keeps the answer).
pub fn read_answer(s: &mut UnixStream) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    let end = s.take(1 << 20).read_to_end(&mut bytes);
    if bytes.is_empty() {
        end?;
    }
    Ok(String::from_utf8_lossy(&bytes).trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mport-ntree:4:2 brought up with two VFs a hypervisor, and the
    /// hypervisors' port GUIDs.
    fn vswitch_subnet() -> (fabric::sim::Fabric, Sm, Vec<u64>) {
        let (f, sm, up) = fabric::sim::bring_up(
            "mport-ntree:4:2",
            fabric::sim::SimConfig {
                vfs: 2,
                ..Default::default()
            },
            smi::sm::SmConfig::default(),
        )
        .unwrap();
        assert!(up);
        let hyps = (sm.hypervisors().into_iter())
            .map(|i| sm.nodes()[i].info.port_guid.0)
            .collect();
        (f, sm, hyps)
    }

    /// A VM socket bound in a fresh directory of its own (`name` tells
    /// the tests' apart): the directory, the socket's path, the socket.
    fn socket_in(name: &str) -> (PathBuf, PathBuf, VmSocket) {
        let dir = std::env::temp_dir().join(format!("ibkit-vmctl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("vm.sock");
        let sock = VmSocket::bind(&path).unwrap();
        (dir, path, sock)
    }

    /// Carried out on a simulated vSwitch subnet: a VM started, moved
    /// with its LID, refused where it must be (nothing changed), stopped.
    #[test]
    fn requests_carried_out_on_a_vswitch_subnet() {
        let (mut f, mut sm, hyps) = vswitch_subnet();
        let mut run = |sm: &mut Sm, line: &str| {
            let r = apply(sm, &VmCommand::parse(line).unwrap());
            assert!(f.run(sm));
            let v = f.verify();
            assert_eq!((v.unreachable, v.loops), (0, 0), "after {line}: {v:?}");
            r.map(|t| serde_json::from_str::<serde_json::Value>(&t).unwrap())
        };
        let a = run(&mut sm, &format!("create {:#x} e1", hyps[0])).unwrap();
        assert_eq!(a["hypervisor"], hex(hyps[0]));
        let lid = a["lid"].clone();
        let m = run(&mut sm, &format!("migrate e1 {:#x}", hyps[2])).unwrap();
        assert_eq!(
            (m["lid"].clone(), m["hypervisor"].clone()),
            (lid, hex(hyps[2]).into())
        );
        assert!(m["lft_blocks"].as_u64().unwrap() > 0);
        let e = run(&mut sm, &format!("migrate e1 {:#x}", hyps[2])).unwrap_err();
        assert_eq!(e, VmError::SameHypervisor.to_string());
        let e = run(&mut sm, &format!("create {:#x} e1", hyps[1])).unwrap_err();
        assert!(e.contains("0x00000000000000e1 is already in use"), "{e}");
        let listed = run(&mut sm, "list").unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 1);
        run(&mut sm, "destroy e1").unwrap();
        assert_eq!(sm.vms().count(), 0);
        assert!(run(&mut sm, "destroy e1").unwrap_err().contains("no VM"));
    }

    /// A request that comes while the SM sweeps is held, and carried out
    /// once the sweep is done; a client that never sends is told so.
    #[test]
    fn a_request_during_a_sweep_waits_for_it() {
        let (mut f, mut sm, hyps) = vswitch_subnet();
        let hyp = hyps[0];
        let (dir, path, mut sock) = socket_in("sweep");
        assert!(
            VmSocket::bind(&path).is_err(),
            "a live socket is not taken over"
        );
        let mut client = UnixStream::connect(&path).unwrap();
        client
            .write_all(format!("create {hyp:#x} 0xe1\n").as_bytes())
            .unwrap();
        let silent = UnixStream::connect(&path).unwrap();
        sm.request_heavy_sweep(f.now_ns() / 1_000_000);
        let t = Instant::now();
        assert!(busy(&sm));
        assert_eq!(sock.serve(&mut sm, t), 0, "held while the SM sweeps");
        assert_eq!(sm.vms().count(), 0);
        assert!(f.run(&mut sm));
        assert!(!busy(&sm));
        assert_eq!(sock.serve(&mut sm, t + Duration::from_millis(10)), 1);
        // Answered once the hypervisor has acknowledged its VF.
        client.set_nonblocking(true).unwrap();
        let mut early = [0u8; 8];
        assert!(
            client.read(&mut early).is_err(),
            "answered before the VF was set"
        );
        client.set_nonblocking(false).unwrap();
        assert!(f.run(&mut sm));
        assert_eq!(sock.serve(&mut sm, t + Duration::from_millis(20)), 0);
        let mut answer = String::new();
        client.read_to_string(&mut answer).unwrap();
        assert!(
            answer.contains(r#""in_place":true,"in_place_ms":10.0"#),
            "{answer}"
        );
        assert!(
            answer.contains("\"vguid\":\"0x00000000000000e1\""),
            "{answer}"
        );
        assert_eq!(sm.vms().count(), 1);
        // The silent one, past its second.
        assert_eq!(sock.serve(&mut sm, t + CLIENT_WAIT * 2), 0);
        let mut said = String::new();
        let mut silent = silent;
        silent.read_to_string(&mut said).unwrap();
        assert_eq!(said.trim(), "error: no request within a second");
        drop(sock);
        assert!(!path.exists(), "removed when dropped");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Neither stage waits for ever: a request held through a sweep
    /// that outlasts [`HOLD`] is carried out then, and refused because
    /// the subnet is not up (nothing changed); a change whose SMPs are
    /// not acknowledged within [`HOLD`] is answered `in_place: false`.
    #[test]
    fn a_held_request_and_an_unacknowledged_change_run_out() {
        let (mut f, mut sm, hyps) = vswitch_subnet();
        let (dir, path, mut sock) = socket_in("out");
        let answer = |c: &mut UnixStream| {
            // A client never answered fails the test instead of hanging it.
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut a = String::new();
            c.read_to_string(&mut a).expect("answered");
            a
        };
        // Held through a sweep the fabric never answers.
        let mut held = UnixStream::connect(&path).unwrap();
        held.write_all(format!("create {:#x} e1\n", hyps[0]).as_bytes())
            .unwrap();
        sm.request_heavy_sweep(f.now_ns() / 1_000_000);
        let t = Instant::now();
        assert!(busy(&sm));
        assert_eq!(sock.serve(&mut sm, t), 0);
        let just_before = t + HOLD - Duration::from_millis(1);
        assert_eq!(sock.serve(&mut sm, just_before), 0, "still held");
        assert_eq!(sock.serve(&mut sm, t + HOLD), 1, "carried out at HOLD");
        assert_eq!(
            answer(&mut held).trim(),
            format!("error: {}", VmError::NotUp)
        );
        assert_eq!(sm.vms().count(), 0, "refused, nothing changed");
        assert!(f.run(&mut sm));
        assert!(!busy(&sm));
        // Carried out, then nothing acknowledged: the fabric is not run.
        let mut unacked = UnixStream::connect(&path).unwrap();
        unacked
            .write_all(format!("create {:#x} e2\n", hyps[1]).as_bytes())
            .unwrap();
        let t = t + HOLD * 2;
        assert_eq!(sock.serve(&mut sm, t), 1);
        assert!(!sm.is_idle(), "the VF's Set is out");
        assert_eq!(sock.serve(&mut sm, t + HOLD - Duration::from_millis(1)), 0);
        unacked.set_nonblocking(true).unwrap();
        assert!(
            unacked.read(&mut [0u8; 8]).is_err(),
            "not answered before HOLD"
        );
        unacked.set_nonblocking(false).unwrap();
        assert_eq!(sock.serve(&mut sm, t + HOLD), 0);
        let a: serde_json::Value = serde_json::from_str(answer(&mut unacked).trim()).unwrap();
        assert_eq!(a["in_place"], false, "{a}");
        assert!(a.get("in_place_ms").is_none(), "{a}");
        assert_eq!(a["vguid"], hex(0xe2));
        assert_eq!(
            sm.vms().count(),
            1,
            "the VM stands; its VF is still being set"
        );
        // Once the fabric answers, the VM is up and the subnet whole.
        assert!(f.run(&mut sm));
        let v = f.verify();
        assert_eq!((v.unreachable, v.loops), (0, 0), "{v:?}");
        drop(sock);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What no request may be: a line past 256 bytes, bytes that are not
    /// text, a fifth client at once. Each is answered with why, and
    /// changes nothing.
    #[test]
    fn oversized_binary_and_crowding_clients_are_refused() {
        let (_f, mut sm, _) = vswitch_subnet();
        let (dir, path, mut sock) = socket_in("bad");
        let answer = |c: &mut UnixStream| {
            let mut a = String::new();
            c.read_to_string(&mut a).unwrap();
            a
        };
        let mut long = UnixStream::connect(&path).unwrap();
        long.write_all(&[b'x'; 4096]).unwrap();
        let mut binary = UnixStream::connect(&path).unwrap();
        binary.write_all(b"list\xff\n").unwrap();
        let mut idle: Vec<UnixStream> = (0..2)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        // The fifth has sent its line before it is turned away.
        let mut fifth = UnixStream::connect(&path).unwrap();
        fifth.write_all(b"list\n").unwrap();
        let t = Instant::now();
        assert_eq!(sock.serve(&mut sm, t), 0);
        assert_eq!(
            answer(&mut long).trim(),
            format!("error: {}", VmCtlError::Line)
        );
        assert_eq!(
            answer(&mut binary).trim(),
            format!("error: {}", VmCtlError::Line)
        );
        assert_eq!(answer(&mut fifth).trim(), "error: busy: try again");
        assert_eq!(sm.vms().count(), 0);
        // `ibkit vm`'s own client, turned away while four are served,
        // reads why whether its line went out before the refusal or not.
        let _more: Vec<UnixStream> = (0..2)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        for pause in [0, 50] {
            let p = path.clone();
            let asking = std::thread::spawn(move || request(&p, "list", Duration::from_secs(5)));
            std::thread::sleep(Duration::from_millis(pause));
            while !asking.is_finished() {
                sock.serve(&mut sm, t);
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(
                asking.join().unwrap().as_deref(),
                Ok("error: busy: try again"),
                "after {pause} ms"
            );
        }
        assert_eq!(sock.serve(&mut sm, t + CLIENT_WAIT * 2), 0);
        for c in &mut idle {
            assert_eq!(answer(c).trim(), "error: no request within a second");
        }
        drop(sock);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An answer followed by a reset (the SM closed with the client's
    /// bytes unread) is still the answer; a reset alone is an error.
    #[test]
    fn an_answer_outlives_the_reset_after_it() {
        let (mut client, mut sm_end) = UnixStream::pair().unwrap();
        client.write_all(b"list\n").unwrap();
        sm_end.write_all(b"error: busy: try again\n").unwrap();
        drop(sm_end);
        let mut plain = String::new();
        let (mut c2, mut s2) = UnixStream::pair().unwrap();
        c2.write_all(b"list\n").unwrap();
        s2.write_all(b"error: busy: try again\n").unwrap();
        drop(s2);
        assert!(
            c2.read_to_string(&mut plain).is_err(),
            "the reset this guards against"
        );
        assert_eq!(read_answer(&mut client).unwrap(), "error: busy: try again");
        let (mut c3, s3) = UnixStream::pair().unwrap();
        c3.write_all(b"list\n").unwrap();
        drop(s3);
        assert!(read_answer(&mut c3).is_err());
    }

    #[test]
    fn requests_and_what_is_refused() {
        // An SM that is not master places no VM, and lists none.
        let mut idle = Sm::new(smi::sm::SmConfig::default());
        let create = VmCommand::parse("create 0x10 0xe1").unwrap();
        let e = apply(&mut idle, &create).unwrap_err();
        assert!(e.contains("not master"), "{e}");
        assert_eq!(apply(&mut idle, &VmCommand::List), Ok("[]".into()));
        assert_eq!(
            VmCommand::parse(" create 0x0002c90300000201  e1 "),
            Ok(VmCommand::Create {
                hypervisor: 0x0002_c903_0000_0201,
                vguid: 0xe1
            })
        );
        assert_eq!(
            VmCommand::parse("migrate 0xE1 0X10"),
            Ok(VmCommand::Migrate {
                vguid: 0xe1,
                to: 0x10
            })
        );
        assert_eq!(
            VmCommand::parse("destroy 1"),
            Ok(VmCommand::Destroy { vguid: 1 })
        );
        assert_eq!(VmCommand::parse("list"), Ok(VmCommand::List));
        assert_eq!(VmCommand::parse("  "), Err(VmCtlError::Empty));
        assert!(matches!(
            VmCommand::parse("list all"),
            Err(VmCtlError::Words { .. })
        ));
        assert!(matches!(
            VmCommand::parse("create 0x1"),
            Err(VmCtlError::Words { .. })
        ));
        assert_eq!(VmCommand::parse("destroy 0"), Err(VmCtlError::ZeroGuid));
        assert!(matches!(
            VmCommand::parse("destroy 0x"),
            Err(VmCtlError::Guid(_))
        ));
        assert!(matches!(
            VmCommand::parse("destroy -1"),
            Err(VmCtlError::Guid(_))
        ));
        assert!(matches!(
            VmCommand::parse("destroy 0x11112222333344445"),
            Err(VmCtlError::Guid(_))
        ));
        let e = VmCommand::parse("reboot\u{1b}").unwrap_err().to_string();
        assert!(e.starts_with("unknown command \"reboot\\u{1b}\""), "{e}");
    }
}
