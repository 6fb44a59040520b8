//! `ibkit vm`: a request to a running SM's VM socket (`ibkit sm
//! --vm-socket PATH`, [`smd::vmctl`]): start a VM on a vSwitch
//! hypervisor, live-migrate it (its LID and vGUID kept), stop it, or list
//! the running VMs. The SM's answer, one JSON line, is printed.

/// Options of `ibkit vm`.
#[derive(Clone, Debug, clap::Args)]
pub struct VmArgs {
    /// The SM's VM socket (`ibkit sm --vm-socket PATH`).
    #[arg(long, value_name = "PATH")]
    pub socket: std::path::PathBuf,
    /// How long to wait for the SM's answer, in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub wait_ms: u64,
    /// The request: `create PORT_GUID VGUID` (a VM on the hypervisor
    /// whose port has that GUID), `migrate VGUID PORT_GUID`, `destroy
    /// VGUID`, or `list`.
    #[arg(required = true, num_args = 1..=3, value_name = "REQUEST")]
    pub request: Vec<String>,
}

/// Sends the request; exit 1 with the SM's reason when it refuses, 2 when
/// the request is malformed or the SM cannot be reached.
pub fn run(a: &VmArgs) -> super::Outcome {
    let line = a.request.join(" ");
    // Checked here first, so that a malformed request is named without
    // reaching the SM.
    smd::vmctl::VmCommand::parse(&line).map_err(|e| e.to_string())?;
    let answer = smd::vmctl::request(
        &a.socket,
        &line,
        std::time::Duration::from_millis(a.wait_ms.max(1)),
    )?;
    if let Some(why) = answer.strip_prefix("error: ") {
        return Err(super::Fail::Check(format!("the SM refused: {why}")));
    }
    if answer.is_empty() {
        return Err(super::Fail::Check(
            "the SM closed the socket without an answer".into(),
        ));
    }
    println!("{answer}");
    Ok(())
}
