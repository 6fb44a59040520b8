//! `ibkit decode`: read MADs as hex text (one 256-byte MAD per line) or from a
//! LINKTYPE_INFINIBAND pcap file, and dump every field
//! ([`fabric::mads::decode`]).

use fabric::mads::decode::{decode_stream, DecodeError, MAX_ERRORS_SHOWN};
use std::io::{BufReader, BufWriter, Write};
use std::path::PathBuf;

/// Options of `ibkit decode`.
#[derive(Clone, Debug, clap::Args)]
pub struct DecodeArgs {
    /// One JSON object per MAD instead of the text dump.
    #[arg(long)]
    pub json: bool,
    /// Input file; `-` or nothing reads standard input.
    pub input: Option<PathBuf>,
}

/// Runs `ibkit decode`.
pub fn main(a: &DecodeArgs) -> super::Outcome {
    run(a.json, a.input.clone())
}

/// Decodes `input` (standard input when `None` or `-`) as text or JSON.
pub fn run(json: bool, input: Option<PathBuf>) -> super::Outcome {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let (mut out, mut err) = (BufWriter::new(stdout.lock()), stderr.lock());
    let res = match input.as_deref() {
        None => decode_stream(std::io::stdin().lock(), json, &mut out, &mut err),
        Some(p) if p.as_os_str() == "-" => {
            decode_stream(std::io::stdin().lock(), json, &mut out, &mut err)
        }
        Some(p) => {
            let f = std::fs::File::open(p).map_err(|e| format!("{}: {e}", p.display()))?;
            decode_stream(BufReader::new(f), json, &mut out, &mut err)
        }
    };
    let res = res.and_then(|s| out.flush().map(|()| s).map_err(DecodeError::Io));
    match res {
        Ok(s) => super::check(s.bad == 0, || {
            format!(
                "{} of {} MADs could not be decoded ({} named above)",
                s.bad,
                s.bad + s.decoded,
                if s.bad <= MAX_ERRORS_SHOWN {
                    "each is".to_string()
                } else {
                    format!("the first {MAX_ERRORS_SHOWN} are")
                }
            )
        }),
        Err(DecodeError::Input(e)) => Err(e.into()),
        Err(DecodeError::Io(e)) => quiet_broken_pipe(e),
    }
}

/// A closed output pipe (`ibkit decode | head`) ends the run quietly.
pub fn quiet_broken_pipe(e: std::io::Error) -> super::Outcome {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(e.to_string().into())
    }
}
