//! `ibkit bench vhca --device NAME`: vhca over a real HCA, measured by
//! [`vhca::bench::verbs`] (the HCA through verbs-sys against a guest
//! process through vhca's `VerbsHca`) and rendered here as text or JSON.

use vhca::bench::verbs::Measure;

/// `ibkit bench vhca --device NAME`.
pub fn run(name: &str, json_out: bool, quick: bool) -> crate::cmd::Outcome {
    let r = vhca::bench::verbs::run(name, quick, super::guest_command(quick)?)?;
    let cmds = r.data_path_commands;
    if json_out {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "vhca over {name} ({}): the HCA through verbs-sys (native) against a guest process through vhca's VerbsHca (mediated data path); medians of {}",
            r.link, r.rounds
        );
        println!(
            "{:<34} {:>12} {:>12} {:>12}",
            "", "native", "guest", "guest/native"
        );
        for row in &r.rows {
            let (a, n, g) = (row.arg, row.native, row.guest);
            let (label, ratio) = match row.test {
                Measure::Registration => (
                    format!("register + deregister {a} page(s)"),
                    format!("{:+.0}%", (g / n - 1.0) * 100.0),
                ),
                Measure::SendLatency => (
                    format!("RC ping-pong one way, {a} B"),
                    format!("{:.0}%", n / g * 100.0),
                ),
            };
            println!("{label:<34} {n:>9.2} µs {g:>9.2} µs {ratio:>12}");
        }
        println!(
            "Backend commands from the guests' data path: {cmds}. The device loop posted {} work requests and moved {} completions; {} objects left on the HCA.",
            r.posted, r.completions, r.device_objects_left
        );
    }
    crate::cmd::check(cmds == 0, || {
        format!("the guests' data path reached the backend: {cmds} commands")
    })
}
