//! The markdown report.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::attack::Attack;
use crate::figures::{Fan, Idle, Latency, Scale, Throughput};
use crate::measure::Load;
use crate::paced::{Delays, Receiver, WARMUP};
use crate::roles::{PROXY, extra_proxy_args};
use crate::server::Target;
use crate::traffic::{Flood, SEED};

fn machine() -> String {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("model name"))?;
            Some(l.split(':').nth(1)?.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!("nproc {nproc}, {cpu}, Linux {kernel}")
}

#[derive(Default)]
pub struct Results {
    pub throughput: Vec<Throughput>,
    pub latency: Vec<Latency>,
    pub delays: Option<Delays>,
    pub idle: Vec<Idle>,
    pub fan: Vec<Fan>,
    pub attack: Option<Attack>,
}

pub fn render(scale: &Scale, load: &Load, res: &Results, elapsed: Duration) -> String {
    let mut r = String::new();
    let _ = writeln!(r, "# acp-journal serve benchmark\n");
    let _ = writeln!(r, "- Machine: {}", machine());
    let _ = writeln!(
        r,
        "- Binary: `{}` (bench profile), extra options: {}",
        Path::new(PROXY)
            .file_name()
            .map_or("".into(), |f| f.to_string_lossy()),
        match extra_proxy_args() {
            a if a.is_empty() => "none".to_string(),
            a => format!("`{}`", a.join(" ")),
        }
    );
    let _ = writeln!(
        r,
        "- Run: {}{}, {:.0} s; {}",
        if scale.quick { "quick" } else { "full" },
        if scale.quick {
            " (`BENCH_QUICK=1`)"
        } else {
            ""
        },
        elapsed.as_secs_f64(),
        load.report(elapsed)
    );
    let _ = writeln!(
        r,
        "- How to run: `BENCH_QUICK=1 cargo bench --bench serve` (~20 s once built; without `BENCH_QUICK` the full run, ~2 min: 10× the floods and round trips, 8× the paced updates, 5× the fan-out's deliveries); report in `target/serve-bench-report.md`"
    );
    let _ = writeln!(
        r,
        "- Paths: (a) `acp-journal --journal-dir <tmp> -- <agent>` on pipes (the baseline); (b) `acp-journal --journal-dir <tmp> serve --listen 127.0.0.1:0 -- <agent>`, a WebSocket client at `/acp`; (c) the same serve, a Streamable HTTP client (`POST`s on one keep-alive socket, the connection's SSE stream on another, no session stream); (c2) the same over HTTP/2 by prior knowledge (h2c), `POST`s and the stream on one socket, the stream paced by serve's 64 KiB flow-control windows. Every client is async on one Tokio thread (pipes included) and makes a session with `session/new` first (serve sends a session's lines only to the connections attached to it). The agents are this bench binary's roles."
    );
    match &scale.sdk_skipped {
        None => {
            let _ = writeln!(
                r,
                "- Path (d), throughput and latency only: the TypeScript SDK 2.4.0's own server (`node tests/agents/ts_sdk_server.mjs --port 0 --token T -- <agent>`, run from a copy in `.peers/node-v2/`: `experimental/server`'s AcpServer with the `ws` adapter), the same WebSocket client with the bearer token. It starts one agent subprocess per connection (the bench opens one connection per measurement), bridged message for message, no journal. Its CPU is the node server's plus that agent child's (the agent's own work is in it, unlike (a)–(c), whose agent is a separate process not counted); its peak RSS is the node process's alone."
            );
        }
        Some(why) => {
            let _ = writeln!(
                r,
                "- Path (d), the TypeScript SDK 2.4.0's own server over WebSocket, skipped: {why}."
            );
        }
    }

    if let Some(base) = res.throughput.first() {
        throughput(&mut r, base, &res.throughput);
    }
    if let Some(direct) = res.latency.first() {
        latency(&mut r, scale, direct, &res.latency);
    }
    if let Some(d) = &res.delays {
        delays(&mut r, d);
    }
    if !res.idle.is_empty() {
        memory(&mut r, &res.idle);
    }
    if !res.fan.is_empty() {
        fan(&mut r, &res.fan);
    }
    if let Some(attack) = &res.attack {
        attacked(&mut r, attack);
    }
    r
}

fn attacked(r: &mut String, attack: &Attack) {
    let _ = writeln!(
        r,
        "\n## 6. Without the token: guessing it, flooding HTTP/2\n"
    );
    let _ = writeln!(
        r,
        "Wrong tokens for {} s, each on a socket of its own (`POST /acp`, `initialize`), each answer awaited; a fresh serve each:\n",
        crate::attack::GUESSING.as_secs()
    );
    let _ = writeln!(r, "| loops at once | guesses answered |");
    let _ = writeln!(r, "|---:|---:|");
    for g in &attack.guessing {
        let _ = writeln!(r, "| {} | {} |", g.loops, g.answered);
    }
    let g = &attack.give_up;
    let _ = writeln!(
        r,
        "\nA guesser that gives up on a guess after {} ms without an answer, the right token its 150th guess: {} guesses, the right token {}.\n",
        crate::attack::GIVE_UP.as_millis(),
        g.tried,
        match g.recognised {
            Some(n) => format!("recognised at guess {n}"),
            None => "never recognised".to_string(),
        }
    );
    let _ = writeln!(
        r,
        "A token holder's round trips (ms) while N sockets flood `PING`s without the token (each reading its answers and connecting again once closed):\n"
    );
    let _ = writeln!(
        r,
        "| N | message p50 | p99 | max | `initialize` p50 | p99 | max | serve CPU s/s | flood sockets | PINGs answered |"
    );
    let _ = writeln!(r, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in &attack.floods {
        let _ = writeln!(
            r,
            "| {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} |",
            f.sockets,
            f.message[0],
            f.message[1],
            f.message[2],
            f.initialize[0],
            f.initialize[1],
            f.initialize[2],
            f.cpu,
            f.connections,
            f.pongs
        );
    }
}

fn throughput(r: &mut String, base: &Throughput, all: &[Throughput]) {
    let bytes = Flood::new(SEED).lines(base.messages).len();
    let _ = writeln!(r, "\n## 1. Throughput: one prompt, a flood back\n");
    let _ = writeln!(
        r,
        "The flood agent answers one `session/prompt` with {} messages ({} `session/update`s of the bench's realistic mix, mean {:.0} B, then the response) as fast as a pipe takes them. Time from the prompt sent to the last message received; median of {} runs per path, the paths rotated. CPU: user + system of the acp-journal process (for (d), the node server and its agent child) (`/proc/PID/stat`, {:.0} µs ticks, summed over the runs) per message. Peak RSS: the process's VmHWM after the flood, the highest of the runs.\n",
        base.messages,
        base.messages - 1,
        bytes as f64 / base.messages as f64,
        base.runs.len(),
        crate::server::tick_us()
    );
    let _ = writeln!(
        r,
        "| path | messages/s | × (a) | CPU µs/message | × (a) | peak RSS MiB |"
    );
    let _ = writeln!(r, "|---|---:|---:|---:|---:|---:|");
    for t in all {
        let _ = writeln!(
            r,
            "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.1} |",
            t.target.name(),
            t.msg_s(),
            t.msg_s() / base.msg_s(),
            t.cpu_us(),
            t.cpu_us() / base.cpu_us(),
            t.hwm() as f64 / 1024.0
        );
    }
}

fn latency(r: &mut String, scale: &Scale, direct: &Latency, all: &[Latency]) {
    let _ = writeln!(r, "\n## 2. Added latency: prompt → response\n");
    let _ = writeln!(
        r,
        "{} round trips per path (after {} of warm-up), interleaved in blocks of {}: a `session/prompt` sent, the turns agent's `agent_message_chunk`, `usage_update` and response received. Added = the path's round trip minus the direct pipe's at the same quantile (both directions, one proxy). CPU: of the proxy or serve process over the timed round trips (the agent's for the direct pipe; for (d), the node server's and its agent child's), from 10 ms ticks.\n",
        direct.rtt.len(),
        scale.warmup,
        (scale.round_trips / 20).max(1)
    );
    let _ = writeln!(
        r,
        "| path | p50 µs | p99 µs | added p50 µs | added p99 µs | CPU µs/round trip |"
    );
    let _ = writeln!(r, "|---|---:|---:|---:|---:|---:|");
    for l in all {
        let added = |q| match l.target {
            Target::Direct => "—".to_string(),
            _ => format!("{:.1}", l.us(q) - direct.us(q)),
        };
        let _ = writeln!(
            r,
            "| {} | {:.1} | {:.1} | {} | {} | {:.1} |",
            l.target.name(),
            l.us(0.5),
            l.us(0.99),
            added(0.5),
            added(0.99),
            l.cpu_us
        );
    }
}

fn memory(r: &mut String, idle: &[Idle]) {
    let _ = writeln!(r, "\n## 4. Memory of serve, idle clients\n");
    let _ = writeln!(
        r,
        "VmRSS of the serve process (the agent, a separate process, not counted) right after start, then with clients connected one after another, each initialized and with a session (`session/new`), idle for 0.5 s before the reading; per added client: the growth over the row before, divided by the clients added.\n"
    );
    let mut header = String::from("| clients |");
    let mut rule = String::from("|---:|");
    for i in idle {
        let _ = write!(
            header,
            " {} VmRSS KiB | KiB per added client |",
            i.target.name()
        );
        rule.push_str("---:|---:|");
    }
    let _ = writeln!(r, "{header}\n{rule}");
    if let Some(first) = idle.first() {
        for (row, (k, _)) in first.rss.iter().enumerate() {
            let mut line = format!("| {k} |");
            for i in idle {
                let (_, kib) = i.rss[row];
                // Over the previous row: the first client also starts the agent's session.
                let per = match row {
                    0 => "—".to_string(),
                    _ => {
                        let (k0, kib0) = i.rss[row - 1];
                        format!("{:.0}", (kib as f64 - kib0 as f64) / (k - k0) as f64)
                    }
                };
                let _ = write!(line, " {kib} | {per} |");
            }
            let _ = writeln!(r, "{line}");
        }
    }
}

fn delays(r: &mut String, d: &Delays) {
    let _ = writeln!(
        r,
        "\n## 3. Update delay: agent → each client attached to a session\n"
    );
    let _ = writeln!(
        r,
        "The pacing agent answers one `session/prompt` with {} `agent_message_chunk` updates (~295 B), one every {} µs, each stamped with the time it was written (`CLOCK_MONOTONIC`, ns); each client notes when each arrives, on a thread and a Tokio runtime of its own. Delay = received − written, the first {WARMUP} updates left out. Through serve, one turn, three clients of one session: A made it (`session/new`) and prompts, B and C joined it by `session/load` before the prompt. For comparison, the same agent and turn through a direct pipe and the stdio proxy (one client each, run before).\n",
        d.updates, d.interval_us
    );
    let _ = writeln!(
        r,
        "| receiver | p50 µs | p90 µs | p99 µs | max µs | p50 over direct µs | p99 over direct µs |"
    );
    let _ = writeln!(r, "|---|---:|---:|---:|---:|---:|---:|");
    let direct = d.rows.iter().find(|x| x.receiver == Receiver::Direct);
    for x in &d.rows {
        let over = |q| match direct {
            Some(base) if x.receiver != Receiver::Direct => format!("{:.1}", x.us(q) - base.us(q)),
            _ => "—".to_string(),
        };
        let _ = writeln!(
            r,
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} |",
            x.receiver.name(),
            x.us(0.5),
            x.us(0.9),
            x.us(0.99),
            x.us(1.0),
            over(0.5),
            over(0.99)
        );
    }
}

fn fan(r: &mut String, all: &[Fan]) {
    let _ = writeln!(
        r,
        "\n## 5. One busy session, 1, 10 and 50 clients attached\n"
    );
    let _ = writeln!(
        r,
        "serve in front of the flood agent; WebSocket clients (async, on the bench's one Tokio thread): the first makes the session (`session/new`) and prompts, the others join it by `session/load` first. Each turn, the agent answers the prompt with a flood of {} messages ({} updates of the throughput mix, then the response), every client takes all of it (the joined ones also the prompt's `user_message_chunk` echo); the next prompt once every client has all of it; turns enough for about the same deliveries at every step. Time: prompt sent → the last client's last message, summed over the turns. CPU: of the serve process over the turns (`/proc/PID/stat`, 10 ms ticks), per update delivered to one client and per update of the agent. RSS: serve's VmRSS with every client attached, before the first prompt; peak: its VmHWM after the last turn.\n",
        all[0].messages,
        all[0].messages - 1
    );
    let _ = writeln!(
        r,
        "| clients | turns | updates delivered | delivered/s | CPU µs/update delivered | CPU µs/agent update | VmRSS before KiB | peak (VmHWM) KiB |"
    );
    let _ = writeln!(r, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in all {
        let _ = writeln!(
            r,
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {} | {} |",
            f.clients,
            f.turns,
            f.delivered(),
            f.delivered_s(),
            f.cpu_us_delivered(),
            f.cpu_us_update(),
            f.rss_before,
            f.hwm
        );
    }
}
