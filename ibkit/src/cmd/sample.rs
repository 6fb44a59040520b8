//! `ibkit sample`: the built-in sample MADs of [`fabric::samples`], as
//! hex lines (input for `decode`) or a pcap.

/// Options of `ibkit sample`.
#[derive(Clone, Debug, clap::Args)]
pub struct SampleArgs {
    /// Write them as a LINKTYPE_INFINIBAND pcap file instead.
    #[arg(long)]
    pub pcap: Option<std::path::PathBuf>,
}

/// Runs `ibkit sample`.
pub fn main(a: &SampleArgs) -> super::Outcome {
    match &a.pcap {
        None => {
            for (what, m) in fabric::samples::samples() {
                println!("# {what}");
                println!("{}", fabric::mads::hex_line(&m));
            }
            Ok(())
        }
        Some(p) => std::fs::write(p, fabric::samples::pcap())
            .map_err(|e| format!("{}: {e}", p.display()).into()),
    }
}
