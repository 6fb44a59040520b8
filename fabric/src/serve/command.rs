//! The commands of ibkit's control interface (`ibkit fabric ctl`).

use super::ServeError;

/// One command, as `ibkit fabric ctl` sends it: a verb and its words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `link-down NODE PORT`: the cable at the port fails.
    LinkDown(String, u8),
    /// `link-up NODE PORT`: the cable taken down at the port is repaired.
    LinkUp(String, u8),
    /// `node-down NODE`: the node is removed.
    NodeDown(String),
    /// `node-up NODE`: a node taken down comes back, freshly powered.
    NodeUp(String),
    /// `node-vfs NODE N`: a hypervisor (or a CA of one or two ports)
    /// taken down with `node-down` comes back with N VFs a port (0: a
    /// plain CA), as when SR-IOV is set up again while it is off.
    NodeVfs(String, usize),
    /// `node-reset NODE`: a switch loses its forwarding tables, keeping
    /// its LID and links ([`crate::sim::Fabric::reset_tables`]).
    NodeReset(String),
    /// `dump FILE`: the fabric's state as JSON, written by the server
    /// (only the users [`super::Access`] admits may ask).
    Dump(String),
    /// `stats`: the server's counters as JSON.
    Stats,
    /// `reload-sm`: SIGHUP to the SM clients the requester runs, so that
    /// each reads its configuration (partitions, QoS, `--config`) again.
    ReloadSm,
    /// `node-desc NODE TEXT…`: the node's NodeDescription becomes TEXT
    /// (the rest of the line, its words joined by single spaces; its
    /// first 64 bytes are kept), as when a host is renamed, and the node
    /// raises trap 144 with NodeDescriptionChange. The node keeps its
    /// name for later commands.
    NodeDesc(String, String),
    /// `port-error NODE PORT TRAP [COUNT]`: the port crosses an error
    /// threshold COUNT times (1 by default, at most
    /// [`MAX_PORT_ERRORS`]), the node raising trap TRAP (129 link
    /// integrity, 130 buffer overrun, 131 flow-control watchdog) each
    /// time, as a port with a failing cable does.
    PortError(String, u8, u16, u32),
    /// `sys-guid NODE GUID`: the node's SystemImageGUID becomes GUID
    /// (hex, `0x` optional), and the node raises trap 145 with it.
    SysGuid(String, u64),
}

/// The most traps one `port-error` raises.
pub const MAX_PORT_ERRORS: u32 = 1000;

impl Command {
    /// Reads a command line; words it does not take are an error.
    pub fn parse(line: &str) -> Result<Command, ServeError> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let verb = *words.first().ok_or(ServeError::Empty)?;
        if verb == "node-desc" {
            let node = words.get(1).ok_or(ServeError::MissingNode)?;
            if words.len() < 3 {
                return Err(ServeError::MissingText);
            }
            return Ok(Command::NodeDesc(node.to_string(), words[2..].join(" ")));
        }
        if verb == "port-error" {
            at_most(&words, 4)?;
            let node = words.get(1).ok_or(ServeError::MissingNode)?;
            let port = (words.get(2).and_then(|p| p.parse::<u8>().ok()))
                .filter(|&p| p >= 1)
                .ok_or(ServeError::MissingPort)?;
            let trap = (words.get(3).and_then(|t| t.parse::<u16>().ok()))
                .filter(|t| (129..=131).contains(t))
                .ok_or(ServeError::BadPortError)?;
            let count = match words.get(4) {
                None => 1,
                Some(c) => (c.parse::<u32>().ok())
                    .filter(|c| (1..=MAX_PORT_ERRORS).contains(c))
                    .ok_or(ServeError::BadPortError)?,
            };
            return Ok(Command::PortError(node.to_string(), port, trap, count));
        }
        if verb == "sys-guid" {
            at_most(&words, 2)?;
            let node = words.get(1).ok_or(ServeError::MissingNode)?;
            let guid = (words.get(2))
                .map(|g| g.trim_start_matches("0x"))
                .filter(|g| !g.is_empty() && g.len() <= 16)
                .and_then(|g| u64::from_str_radix(g, 16).ok())
                .ok_or(ServeError::BadGuid)?;
            return Ok(Command::SysGuid(node.to_string(), guid));
        }
        let takes = match verb {
            "link-down" | "link-up" | "node-vfs" => 2,
            "node-down" | "node-up" | "node-reset" | "dump" => 1,
            "stats" | "reload-sm" => 0,
            v => return Err(ServeError::Unknown(v.escape_debug().to_string())),
        };
        at_most(&words, takes)?;
        let node = || {
            words
                .get(1)
                .map(|s| s.to_string())
                .ok_or(ServeError::MissingNode)
        };
        let port = || {
            words
                .get(2)
                .and_then(|p| p.parse::<u8>().ok())
                .filter(|&p| p >= 1)
                .ok_or(ServeError::MissingPort)
        };
        Ok(match verb {
            "link-down" => Command::LinkDown(node()?, port()?),
            "link-up" => Command::LinkUp(node()?, port()?),
            "node-down" => Command::NodeDown(node()?),
            "node-up" => Command::NodeUp(node()?),
            "node-reset" => Command::NodeReset(node()?),
            "node-vfs" => Command::NodeVfs(
                node()?,
                (words.get(2).and_then(|n| n.parse::<usize>().ok()))
                    .filter(|&n| n <= smi::sma::hypervisor::MAX_VFS)
                    .ok_or(ServeError::MissingVfs)?,
            ),
            "dump" => Command::Dump(words.get(1).ok_or(ServeError::MissingPath)?.to_string()),
            "reload-sm" => Command::ReloadSm,
            _ => Command::Stats,
        })
    }
}

/// `Err` when the command `words` (its verb first) has more than `takes`
/// arguments, naming the first too many.
fn at_most(words: &[&str], takes: usize) -> Result<(), ServeError> {
    match words.get(takes + 1) {
        Some(extra) => Err(ServeError::Extra {
            verb: words[0].to_string(),
            takes,
            extra: extra.escape_debug().to_string(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_their_words() {
        assert_eq!(
            Command::parse(" link-down S-1  3 "),
            Ok(Command::LinkDown("S-1".into(), 3))
        );
        assert_eq!(Command::parse("stats"), Ok(Command::Stats));
        assert_eq!(Command::parse("reload-sm"), Ok(Command::ReloadSm));
        assert!(Command::parse("reload-sm now").is_err());
        assert_eq!(
            Command::parse("dump /tmp/x"),
            Ok(Command::Dump("/tmp/x".into()))
        );
        assert_eq!(Command::parse(""), Err(ServeError::Empty));
        assert_eq!(Command::parse("link-up S-1"), Err(ServeError::MissingPort));
        assert_eq!(
            Command::parse("link-up S-1 0"),
            Err(ServeError::MissingPort)
        );
        assert_eq!(
            Command::parse("link-up S-1 256"),
            Err(ServeError::MissingPort)
        );
        assert_eq!(Command::parse("node-up"), Err(ServeError::MissingNode));
        assert_eq!(
            Command::parse("node-vfs H-1 2"),
            Ok(Command::NodeVfs("H-1".into(), 2))
        );
        assert_eq!(Command::parse("node-vfs H-1"), Err(ServeError::MissingVfs));
        assert_eq!(
            Command::parse("node-vfs H-1 129"),
            Err(ServeError::MissingVfs)
        );
        assert_eq!(
            Command::parse("node-vfs H-1 -1"),
            Err(ServeError::MissingVfs)
        );
        assert_eq!(Command::parse("dump"), Err(ServeError::MissingPath));
        assert_eq!(
            Command::parse("node-desc H-1  web01  HCA-1"),
            Ok(Command::NodeDesc("H-1".into(), "web01 HCA-1".into()))
        );
        assert_eq!(
            Command::parse("node-desc H-1"),
            Err(ServeError::MissingText)
        );
        assert_eq!(Command::parse("node-desc"), Err(ServeError::MissingNode));
        assert_eq!(
            Command::parse("port-error S-1 3 129"),
            Ok(Command::PortError("S-1".into(), 3, 129, 1))
        );
        assert_eq!(
            Command::parse("port-error S-1 3 131 1000"),
            Ok(Command::PortError("S-1".into(), 3, 131, 1000))
        );
        for bad in [
            "port-error S-1 3 128",
            "port-error S-1 3 129 0",
            "port-error S-1 3 129 1001",
            "port-error S-1 3",
        ] {
            assert_eq!(Command::parse(bad), Err(ServeError::BadPortError), "{bad}");
        }
        assert_eq!(
            Command::parse("port-error S-1 0 129"),
            Err(ServeError::MissingPort)
        );
        assert_eq!(
            Command::parse("sys-guid H-1 0x0002c90300005151"),
            Ok(Command::SysGuid("H-1".into(), 0x0002_c903_0000_5151))
        );
        assert_eq!(
            Command::parse("sys-guid H-1 5151"),
            Ok(Command::SysGuid("H-1".into(), 0x5151))
        );
        for bad in [
            "sys-guid H-1",
            "sys-guid H-1 0x",
            "sys-guid H-1 zz",
            "sys-guid H-1 0x12345678901234567",
        ] {
            assert_eq!(Command::parse(bad), Err(ServeError::BadGuid), "{bad}");
        }
        assert!(matches!(
            Command::parse("port-error S-1 3 129 2 x"),
            Err(ServeError::Extra { .. })
        ));
        let e = Command::parse("stats now").unwrap_err().to_string();
        assert_eq!(e, "stats takes 0 argument(s); unexpected \"now\"");
        let e = Command::parse("reboot\u{1b}").unwrap_err().to_string();
        assert!(e.starts_with("unknown command \"reboot\\u{1b}\""), "{e}");
    }
}
