//! `replay`: a recording played as the agent on stdio, to whatever client starts it.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cli::{Pace, ReplayArgs};
use crate::journal::JournalDir;
use crate::replay::player::Player;

/// How long the player waits when nothing is scheduled (it wakes on every client line anyway).
const IDLE: Duration = Duration::from_secs(3600);

/// Client lines, read on their own thread; `None` at end of input.
fn client_lines() -> mpsc::Receiver<Option<Vec<u8>>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        loop {
            let mut line = Vec::new();
            match stdin.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if tx.send(Some(line)).is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(None);
    });
    rx
}

fn scaled(pace: Pace, delay_us: u64) -> Duration {
    match pace {
        Pace::Recorded => Duration::from_micros(delay_us),
        Pace::Fast => Duration::ZERO,
        Pace::Speed(n) => Duration::from_secs_f64(delay_us as f64 / 1e6 / n),
    }
}

/// Serve the recording until the client closes stdin.
pub(super) fn run(journals: &JournalDir, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let recording = super::sources::recording(journals, &args.sources)?;
    for note in &recording.notes {
        eprintln!("acp-journal replay: {note}");
    }
    let sessions = recording.sessions.len();
    let mut player = Player::new(recording, args.strict);
    let input = client_lines();
    let mut out = std::io::stdout().lock();
    let mut due: Option<Instant> = None;
    let mut eof = false;
    while !eof {
        while let Some(line) = player.take_immediate() {
            out.write_all(&line)?;
            out.flush()?;
        }
        for report in player.take_reports() {
            eprintln!("acp-journal replay: differs from the recording: {report}");
        }
        let wait = match player.next_out() {
            Some(next) => {
                let at =
                    *due.get_or_insert_with(|| Instant::now() + scaled(args.pace, next.delay_us));
                at.saturating_duration_since(Instant::now())
            }
            None => IDLE,
        };
        if wait.is_zero() {
            if let Some(next) = player.take_out() {
                out.write_all(&next.line)?;
                out.flush()?;
            }
            due = None;
            continue;
        }
        match input.recv_timeout(wait) {
            Ok(Some(line)) => player.client_line(&line),
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => eof = true,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    for report in player.take_reports() {
        eprintln!("acp-journal replay: differs from the recording: {report}");
    }
    eprintln!(
        "acp-journal replay: served {} requests from {sessions} recorded session(s); {} difference(s)",
        player.served(),
        player.divergences()
    );
    Ok(if args.strict && player.divergences() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
