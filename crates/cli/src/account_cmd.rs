//! `xsched account`: what every queue the daemon schedules went through, and the totals per
//! process and per tenant (uid), from the accounting each client reports with its statistics
//! (about once a second; in every mode, observe included). An operator sees only the queues
//! the daemon lets them see (docs/guides/daemon.md, "Who may do what").

use anyhow::Result;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use serde_json::{Value, json};
use std::path::Path;
use xsched_proto::{WireAccount, account_totals, client};

/// Print the accounting (a table per level, or one JSON document).
pub fn run(socket: &Path, json: bool) -> Result<()> {
    let mut s = client::connect(socket, crate::daemon_cmds::TIMEOUT)?;
    let rows = client::top(&mut s)?;
    drop(s);
    let (processes, tenants) = account_totals(&rows);
    if json {
        let queues: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "pid": r.pid, "uid": r.uid, "process": r.process, "device": r.device,
                    "queue": r.queue, "mode": r.stats.mode.map(|m| m.name()),
                    "account": account_json(&r.stats.account),
                })
            })
            .collect();
        let processes: Vec<Value> = processes
            .iter()
            .map(|(&(uid, pid), p)| {
                json!({"pid": pid, "uid": uid, "process": p.name, "queues": p.queues, "account": account_json(&p.account)})
            })
            .collect();
        let tenants: Vec<Value> = tenants
            .iter()
            .map(|(uid, t)| {
                json!({"uid": uid, "processes": t.processes, "queues": t.queues, "account": account_json(&t.account)})
            })
            .collect();
        let doc = json!({"queues": queues, "processes": processes, "tenants": tenants});
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    let mut t = table(&["tenant (uid)", "processes", "queues"]);
    for (uid, total) in &tenants {
        t.add_row(cells(
            [
                uid.to_string(),
                total.processes.to_string(),
                total.queues.to_string(),
            ],
            &total.account,
        ));
    }
    println!("per tenant\n{t}");
    let mut t = table(&["pid", "uid", "process", "queues"]);
    for (&(uid, pid), total) in &processes {
        t.add_row(cells(
            [
                pid.to_string(),
                uid.to_string(),
                total.name.clone(),
                total.queues.to_string(),
            ],
            &total.account,
        ));
    }
    println!("per process\n{t}");
    let mut t = table(&["pid", "device", "queue", "mode"]);
    for r in &rows {
        let mode = r.stats.mode_name().to_string();
        t.add_row(cells(
            [
                r.pid.to_string(),
                r.device.to_string(),
                r.queue.to_string(),
                mode,
            ],
            &r.stats.account,
        ));
    }
    println!("per queue\n{t}");
    Ok(())
}

/// The columns every level shows after its own.
const FIGURES: [&str; 8] = [
    "completed",
    "device ms",
    "wait ms",
    "launch wait ms",
    "SLO misses",
    "preemptions",
    "held ms",
    "interrupts",
];

fn table(first: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(first.iter().chain(FIGURES.iter()).copied());
    t
}

fn ms(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e6)
}

fn cells<const N: usize>(first: [String; N], a: &WireAccount) -> Vec<String> {
    let device = format!(
        "{} ({})",
        ms(a.device_ns),
        if a.device_measured { "m" } else { "e" }
    );
    let mut row: Vec<String> = first.into();
    row.extend([
        a.completed.to_string(),
        device,
        ms(a.waiting_ns()),
        ms(a.queue_wait_ns),
        a.latency_misses.to_string(),
        a.preemptions.to_string(),
        ms(a.held_ns),
        a.interrupts.to_string(),
    ]);
    row
}

/// An account in JSON, durations in nanoseconds, and whether device time was measured.
fn account_json(a: &WireAccount) -> Value {
    json!({
        "submitted": a.submitted, "launched": a.launched, "completed": a.completed,
        "cancelled": a.cancelled, "latency_ns": a.latency_ns, "device_ns": a.device_ns,
        "device_time": if a.device_measured { "measured" } else { "estimated" },
        "waiting_ns": a.waiting_ns(),
        "queue_wait_ns": a.queue_wait_ns, "queue_wait_max_ns": a.queue_wait_max_ns,
        "max_in_flight": a.max_in_flight, "latency_misses": a.latency_misses,
        "preemptions": a.preemptions, "held_ns": a.held_ns,
        "preemption_cost_ns": a.preemption_cost_ns, "interrupts": a.interrupts,
    })
}
