//! `ibkit bench vhca`: the software HCA used directly ("native") against
//! the same HCA used by guests through vhca from a second process, measured
//! by [`vhca::bench`] (whose documentation says what and how), and
//! rendered here as text or JSON. The guest process is this binary again,
//! as `ibkit bench vhca --guest SOCK [--quick]`.

pub mod verbs;

use std::path::Path;
use std::process::Command;
use vhca::bench::{Report, Results};

/// The command that starts the guest side: this binary with
/// `bench vhca --guest SOCK`, and `--quick` in a quick run.
fn guest_command(quick: bool) -> Result<impl FnOnce(&Path) -> Command, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Ok(move |sock: &Path| {
        let mut c = Command::new(exe);
        c.args(["bench", "vhca", "--guest"]).arg(sock);
        if quick {
            c.arg("--quick");
        }
        c
    })
}

/// `ibkit bench vhca --guest SOCK`: the guest side, in the child process,
/// on this process's standard input and output.
pub fn guest(sock: &Path, quick: bool) -> super::Outcome {
    let input = std::io::stdin().lock();
    Ok(vhca::bench::guest(sock, quick, input, std::io::stdout())?)
}

/// `ibkit bench vhca`: runs [`vhca::bench::run`] and prints its report;
/// a failed check when the data path reached the backend.
pub fn run(json_out: bool, quick: bool) -> super::Outcome {
    let r = vhca::bench::run(quick, guest_command(quick)?)?;
    if json_out {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        print_report(&r);
    }
    let (guest_cmds, native_cmds) = (r.data_path_commands.guest, r.data_path_commands.native);
    super::check(guest_cmds == 0 && native_cmds == 0, || {
        format!(
            "the data path reached the backend: {guest_cmds} commands from the guests, {native_cmds} from the native side"
        )
    })
}

/// A message size in words.
fn size_label(s: u64) -> String {
    if s >= 1 << 20 {
        format!("{} MiB", s >> 20)
    } else if s >= 1 << 10 {
        format!("{} KiB", s >> 10)
    } else {
        format!("{s} B")
    }
}

/// The report as tables.
fn print_report(r: &Report) {
    let (nat, gst) = (&r.native, &r.guest);
    type Column = fn(&Results) -> &Vec<(u64, f64)>;
    let table = |title: &str, col: Column, unit: &str, higher_better: bool| {
        println!("{title}");
        println!(
            "  {:>8}  {:>12}  {:>12}  {:>7}",
            "size",
            format!("native {unit}"),
            format!("guest {unit}"),
            "guest/native"
        );
        for (&(s, n), &(_, g)) in col(nat).iter().zip(col(gst)) {
            let ratio = if higher_better { g / n } else { n / g };
            println!(
                "  {:>8}  {:>12.2}  {:>12.2}  {:>11.1}%",
                size_label(s),
                n,
                g,
                ratio * 100.0
            );
        }
    };
    println!(
        "vhca: the software HCA natively and from a guest process, alternating, median of {} rounds (guest/native: the guest's performance as a share of native's)",
        r.rounds
    );
    table(
        "RC send/recv ping-pong, one way",
        |x| &x.send_latency_us,
        "µs",
        false,
    );
    table(
        "RDMA write, post to completion",
        |x| &x.write_latency_us,
        "µs",
        false,
    );
    table("RC send bandwidth", |x| &x.send_bw_mbs, "MB/s", true);
    table("RDMA write bandwidth", |x| &x.write_bw_mbs, "MB/s", true);
    println!(
        "Blocking on completion events, ping-pong one way: native {:.2} µs, guest {:.2} µs (floor: bare eventfd wake-ups in the same placement, {:.2} µs)",
        nat.event_latency_us, gst.event_latency_us, r.event_wake_floor_us
    );
    println!(
        "The same, each side polling its event ring instead of sleeping (the channel without the wake-up): native {:.2} µs, guest {:.2} µs",
        nat.event_ring_latency_us, gst.event_ring_latency_us
    );
    println!(
        "A privileged call (QueryPort): native {:.2} µs, guest {:.2} µs",
        nat.call_us, gst.call_us
    );
    println!("Memory registration (register + deregister, pages translated and pinned)");
    println!(
        "  {:>8}  {:>12}  {:>12}  {:>9}",
        "pages", "native µs", "guest µs", "overhead"
    );
    for (&(p, n), &(_, g)) in nat.reg_us.iter().zip(&gst.reg_us) {
        println!(
            "  {:>8}  {:>12.2}  {:>12.2}  {:>8.0}%",
            p,
            n,
            g,
            (g / n - 1.0) * 100.0
        );
    }
    let b = &r.backend;
    println!(
        "Backend commands during {} data-path messages: guest {}, native {}. Guest backend: {} commands executed in all, {} events in {} notifications, {} guests torn down, {} device objects left",
        r.data_path_messages,
        r.data_path_commands.guest,
        r.data_path_commands.native,
        b.commands_executed,
        b.events,
        b.notifications,
        b.guests_torn_down,
        b.device_objects_left,
    );
}
