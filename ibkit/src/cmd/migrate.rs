//! `ibkit migrate`: the vSwitch migration experiment of
//! [`fabric::migrate`] on one fabric, or Table I of the vSwitch paper on
//! its four fat trees (`--table`, with `--plot` for an SVG chart),
//! rendered as text or JSON.

use super::args::{parse_engine, parse_policy, parse_vfs, Progress, TOPOLOGY_HELP};
use fabric::migrate::{
    kinds, table, FabricReport, FullAt, MigrateConfig, Note, TableRow, TableSummary,
    DEFAULT_VERIFY_LIMIT, TABLE_FABRICS,
};
use std::path::PathBuf;

/// The options of `ibkit migrate`.
#[derive(Clone, Debug, clap::Args)]
pub struct MigrateArgs {
    /// The fabric: a topology spec.
    #[arg(long, default_value = "fat-tree-648", help = TOPOLOGY_HELP)]
    pub topology: String,
    /// prepopulated (every VF has a LID from bring-up) or dynamic (a VM gets one when it starts).
    #[arg(long, default_value = "prepopulated", value_parser = parse_policy)]
    pub policy: smi::sm::LidPolicy,
    /// VFs per hypervisor (at most 128).
    #[arg(long, default_value_t = 16, value_parser = parse_vfs)]
    pub vfs: usize,
    /// VMs to start, spread over the hypervisors.
    #[arg(long, default_value_t = 64)]
    pub vms: usize,
    /// Migrations: near (same leaf), far (farthest leaf), random, in turn.
    #[arg(long, default_value_t = 3)]
    pub migrations: usize,
    /// Routing engine: minhop, updn, ftree, dor or lash.
    #[arg(long, default_value = "ftree", value_parser = parse_engine)]
    pub routing: smi::sm::Engine,
    /// Point the VM's LID at port 255 on the switches to update first (deadlock mitigation).
    #[arg(long)]
    pub mitigate: bool,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Walks above which each migration is checked by walking every live node to the LIDs it moved (every other LFT entry compared with its value before) instead of every node to every LID.
    #[arg(long, default_value_t = DEFAULT_VERIFY_LIMIT)]
    pub verify_limit: u64,
    /// Reproduce the vSwitch paper's Table I on its four fat trees from measured runs.
    #[arg(long)]
    pub table: bool,
    /// With --table: far migrations swept per fabric.
    #[arg(long, default_value_t = 12)]
    pub sweep: usize,
    /// With --table: fabrics to measure (comma-separated; default the four of Table I).
    #[arg(long, value_delimiter = ',')]
    pub fabrics: Vec<String>,
    /// With --table: draw the comparison as an SVG chart to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// One JSON object (with --table: an array, one object per fabric).
    #[arg(long)]
    pub json: bool,
}

/// Runs `ibkit migrate`.
pub fn main(a: &MigrateArgs) -> super::Outcome {
    if a.table || a.plot.is_some() {
        return run_table(a);
    }
    let cfg = MigrateConfig {
        topology: a.topology.clone(),
        policy: a.policy,
        vfs: a.vfs,
        vms: a.vms,
        migrations: a.migrations,
        routing: a.routing,
        mitigate: a.mitigate,
        seed: a.seed,
        verify_limit: a.verify_limit,
    };
    run(&cfg, a.json)
}

/// Prints the closing summary of a run.
pub fn print_summary(r: &FabricReport) {
    println!();
    println!(
        "{} — {} switches, {} hypervisors × {} VFs, {} LIDs, {} policy",
        r.topology,
        r.switches,
        r.hypervisors,
        r.vfs,
        r.lids,
        r.policy.name()
    );
    println!(
        "{:<4} {:<7} {:>5} {:>6} {:<12} {:<12} {:>6} {:>5} {:>9} {:>10}  verified",
        "#", "kind", "VM", "LID", "from", "to", "SMPs", "LFT", "switches", "plan µs"
    );
    for (i, m) in r.migrations.iter().enumerate() {
        println!(
            "{:<4} {:<7} {:>5} {:>6} {:<12} {:<12} {:>6} {:>5} {:>9} {:>10.1}  {}",
            i + 1,
            m.kind.name(),
            m.vm,
            m.lid,
            m.from,
            m.to,
            m.smps,
            m.lft_smps,
            m.switches_updated,
            m.plan_us,
            if m.verified() {
                format!("yes ({})", m.check.label())
            } else {
                "NO".to_string()
            }
        );
    }
    let worst = r.migrations.iter().map(|m| m.smps).max().unwrap_or(0);
    println!(
        "full traditional reconfiguration of the same fabric: {} SMPs (every block of {} on {} switches) after {:.0} ms of route computation",
        r.full_reconfig_smps, r.blocks, r.switches, r.full_reconfig_route_ms
    );
    if worst > 0 {
        println!(
            "a live migration here costs at most {worst} SMPs: {:.0}× fewer, and no route computation",
            r.full_reconfig_smps as f64 / worst as f64
        );
    }
}

/// Runs `ibkit migrate` on one fabric.
pub fn run(a: &MigrateConfig, json: bool) -> super::Outcome {
    // Steps: bring-up, VMs, each migration, the full reconfiguration,
    // the traffic.
    let bar = Progress::new(a.migrations as u64 + 4, json);
    let mut progress = |n: Note| {
        if let Note::Stage(_) = n {
            bar.step();
        }
        bar.line(n.text());
    };
    let r = fabric::migrate::session(a, &kinds(a.migrations), FullAt::End, &mut progress)?;
    bar.step();
    bar.line("traffic: two VMs over vhca on their hypervisors' HCAs, one migrates…");
    let t = vhca::traffic::demo(&a.topology, a.vfs, a.policy, a.routing)?;
    bar.finish();
    if json {
        let mut v = serde_json::to_value(r.summary())?;
        v["traffic"] = serde_json::to_value(&t)?;
        println!("{v}");
    } else {
        print_summary(&r);
        super::traffic::print(&t);
    }
    if let Some(e) = r.failure() {
        return Err(super::Fail::Check(e));
    }
    super::check(t.good(), || {
        format!(
            "{}: the traffic check failed (messages lost, or the VM's LID, GID or SA path changed across its migration)",
            a.topology
        )
    })
}

/// `--table`: Table I measured on `a.fabrics` (default the paper's four).
fn run_table(a: &MigrateArgs) -> super::Outcome {
    let list: Vec<&str> = if a.fabrics.is_empty() {
        TABLE_FABRICS.to_vec()
    } else {
        a.fabrics.iter().map(|s| s.as_str()).collect()
    };
    // Steps: two runs (copy and swap) per fabric.
    let bar = Progress::new(2 * list.len() as u64, a.json);
    let mut started = 0;
    let mut progress = |n: Note| {
        if let Note::Fabric(_) = n {
            if started > 0 {
                bar.step();
            }
            started += 1;
        }
        bar.line(n.text());
    };
    let rows = table(&list, a.sweep, a.verify_limit, &mut progress)?;
    bar.finish();
    if let Some(p) = &a.plot {
        std::fs::write(p, plot_svg(&rows)).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if a.json {
        let v: Vec<TableSummary> = rows.iter().map(TableRow::summary).collect();
        println!("{}", serde_json::to_string(&v)?);
    } else {
        print_table(&rows);
        if let Some(p) = &a.plot {
            println!("chart written to {}", p.display());
        }
    }
    match rows.iter().find_map(TableRow::failure) {
        Some(e) => Err(super::Fail::Check(e)),
        None => Ok(()),
    }
}

/// Prints Table I.
pub fn print_table(rows: &[TableRow]) {
    println!();
    println!("Table I (vSwitch paper), measured: LFT SMPs of a full reconfiguration and of LID swap/copy");
    println!(
        "{:<15} {:>6} {:>8} {:>6} {:>7} {:>12} {:>9} {:>9} {:>12} {:>9} {:>9}  verified",
        "fabric",
        "nodes",
        "switches",
        "LIDs",
        "blocks",
        "full reconf",
        "swap min",
        "swap max",
        "max measured",
        "copy max",
        "plan µs"
    );
    for r in rows.iter().map(TableRow::summary) {
        println!(
            "{:<15} {:>6} {:>8} {:>6} {:>7} {:>12} {:>9} {:>9} {:>12} {:>9} {:>9.1}  {}",
            r.topology,
            r.nodes,
            r.switches,
            r.lids,
            r.min_lft_blocks_per_switch,
            r.full_reconfig_smps,
            opt(r.swap_smps_min),
            r.swap_smps_max,
            opt(r.swap_smps_max_measured),
            opt(r.copy_smps_max_measured),
            r.plan_us_max,
            match (r.verified, r.check.copy == r.check.swap) {
                (false, _) => "NO".into(),
                (true, true) => format!("yes ({})", r.check.copy),
                (true, false) => "yes (changed LIDs)".into(),
            }
        );
    }
    println!("(swap max = the paper's bound, two blocks on every switch; max measured = the worst of the far migrations swept)");
    println!("(verified: all pairs after each bring-up; after each migration all pairs, or, above the walk limit, every live node to the moved LIDs with every other LFT entry compared)");
}

fn opt(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

/// A chart line: label, colour, value per row.
type Series<'a> = (&'a str, &'a str, Box<dyn Fn(&TableRow) -> f64>);

/// Draws the paper's comparison — SMPs against fabric size, full
/// reconfiguration against LID swap (bound, worst measured, best measured)
/// on a log scale — as a self-contained SVG.
pub fn plot_svg(rows: &[TableRow]) -> String {
    let (w, h) = (860.0, 480.0);
    let (left, right, top, bottom) = (80.0, 250.0, 40.0, 60.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let ymax = rows
        .iter()
        .map(|r| r.copy.full_reconfig_smps.max(1))
        .max()
        .unwrap_or(10) as f64;
    let decades = ymax.log10().ceil().max(1.0);
    let x = |i: usize| left + pw * (i as f64 + 0.5) / rows.len().max(1) as f64;
    let y = |v: f64| top + ph * (1.0 - v.max(1.0).log10() / decades);
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15">SMPs to reconfigure after a VM migration (measured, ibkit)</text>
"##,
        left + pw / 2.0
    );
    for d in 0..=decades as u32 {
        let yy = y(10f64.powi(d as i32));
        s += &format!(
            r##"<line x1="{left}" y1="{yy}" x2="{}" y2="{yy}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">10<tspan dy="-6" font-size="9">{d}</tspan></text>
"##,
            left + pw,
            left - 6.0,
            yy + 4.0
        );
    }
    s += &format!(
        r##"<line x1="{left}" y1="{top}" x2="{left}" y2="{}" stroke="black"/><line x1="{left}" y1="{}" x2="{}" y2="{}" stroke="black"/>
<text x="18" y="{}" transform="rotate(-90 18 {})" text-anchor="middle">SMPs (log scale)</text>
"##,
        top + ph,
        top + ph,
        left + pw,
        top + ph,
        top + ph / 2.0,
        top + ph / 2.0
    );
    for (i, r) in rows.iter().enumerate() {
        s += &format!(
            r##"<text x="{}" y="{}" text-anchor="middle">{} nodes</text>
"##,
            x(i),
            top + ph + 20.0,
            r.copy.nodes
        );
    }
    let series: [Series; 4] = [
        (
            "full reconfiguration",
            "#c0392b",
            Box::new(|r| r.copy.full_reconfig_smps as f64),
        ),
        (
            "LID swap, bound (2 × switches)",
            "#e67e22",
            Box::new(|r| r.swap.swap_max_bound() as f64),
        ),
        (
            "LID swap, worst measured",
            "#2980b9",
            Box::new(|r| r.swap.swap_max_measured().unwrap_or(1) as f64),
        ),
        (
            "LID swap, best measured",
            "#27ae60",
            Box::new(|r| r.swap.swap_min().unwrap_or(1) as f64),
        ),
    ];
    let mut marks = String::new();
    for (k, (label, colour, f)) in series.iter().enumerate() {
        let pts: Vec<String> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| format!("{:.1},{:.1}", x(i), y(f(r))))
            .collect();
        s += &format!(
            r##"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>
"##,
            pts.join(" ")
        );
        // Points and values over every line, drawn after all of them.
        for (i, r) in rows.iter().enumerate() {
            let v = f(r);
            marks += &format!(
                r##"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{colour}"/><text x="{:.1}" y="{:.1}" font-size="10" fill="{colour}" stroke="white" stroke-width="3" paint-order="stroke">{}</text>
"##,
                x(i),
                y(v),
                x(i) + 6.0,
                y(v) - 6.0,
                v as u64
            );
        }
        let ly = top + 20.0 + 22.0 * k as f64;
        s += &format!(
            r##"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{}">{label}</text>
"##,
            left + pw + 12.0,
            left + pw + 32.0,
            left + pw + 38.0,
            ly + 4.0
        );
    }
    s += &marks;
    s += "</svg>\n";
    s
}
