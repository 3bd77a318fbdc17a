use super::*;

fn open(session: &str, t: i64) -> CatalogEntry {
    CatalogEntry::Open {
        session: session.into(),
        segment: format!(
            "sessions/{}/{t}.acpj.zst",
            crate::journal::dir::session_key(session)
        ),
        cwd: Some("/w".into()),
        agent: Some("agent".into()),
        agent_name: None,
        git_branch: Some("main".into()),
        t,
        agent_info: None,
    }
}

#[test]
fn a_child_session_is_counted_once_with_its_root_and_listed_on_its_own_never() {
    let mut summaries = Summaries::default();
    let child = |child: &str, t| CatalogEntry::Child {
        session: "root".into(),
        child: child.into(),
        parent: "root".into(),
        t,
    };
    for entry in [
        open("root", 1),
        child("c1", 2),
        child("c2", 3),
        child("c1", 4),
    ] {
        summaries.apply(entry);
    }
    // A child of a session the catalog never opened is nobody's.
    summaries.apply(CatalogEntry::Child {
        session: "ghost".into(),
        child: "c3".into(),
        parent: "ghost".into(),
        t: 5,
    });
    assert_eq!(summaries.by_id["root"].subagents, 2);
    assert_eq!(summaries.by_id.len(), 1, "no child is a session of its own");
}

#[test]
fn the_index_reads_only_what_was_appended_and_starts_over_after_a_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let journals = JournalDir::new(dir.path());
    journals.create_dirs().unwrap();
    let mut index = CatalogIndex::new(&journals);
    assert!(index.refresh().unwrap().is_empty(), "no catalog yet");
    journals.append_catalog(&open("a", 1)).unwrap();
    journals.append_catalog(&open("b", 2)).unwrap();
    assert_eq!(index.refresh().unwrap(), ["a", "b"]);
    assert!(index.refresh().unwrap().is_empty(), "nothing new");
    for entry in [
        CatalogEntry::State {
            session: "a".into(),
            state: "running".into(),
            t: 5,
        },
        CatalogEntry::Usage {
            session: "a".into(),
            usage: serde_json::json!({"used": 1, "size": 9}),
            t: 6,
        },
        CatalogEntry::Usage {
            session: "a".into(),
            usage: serde_json::json!({"used": 2}),
            t: 7,
        },
        CatalogEntry::TurnEnded {
            session: "a".into(),
            turns: 1,
            t: 8,
        },
    ] {
        journals.append_catalog(&entry).unwrap();
    }
    // A line still being written is left for later.
    std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("catalog.ndjson"))
        .unwrap()
        .write_all(br#"{"ev":"delete","session":"b""#)
        .unwrap();
    assert_eq!(index.refresh().unwrap(), ["a"]);
    let a = index.get("a").unwrap();
    assert_eq!(a.state.as_deref(), Some("running"));
    assert_eq!(a.usage, Some(serde_json::json!({"used": 2, "size": 9})));
    assert_eq!((a.last_turn_ended, a.updated), (Some(8), 8));
    assert_eq!(a.git_branch.as_deref(), Some("main"));
    std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("catalog.ndjson"))
        .unwrap()
        .write_all(b",\"t\":9}\n")
        .unwrap();
    assert_eq!(index.refresh().unwrap(), ["b"]);
    assert!(index.get("b").unwrap().deleted);
    // Rewritten shorter: read again from the start.
    std::fs::write(
        dir.path().join("catalog.ndjson"),
        serde_json::to_string(&open("c", 3)).unwrap() + "\n",
    )
    .unwrap();
    assert_eq!(index.refresh().unwrap(), ["c"]);
    assert!(index.get("a").is_none());
}

#[test]
fn a_live_session_counts_its_turns_as_they_end_and_its_close_does_not_count_them_twice() {
    let dir = tempfile::tempdir().unwrap();
    let journals = JournalDir::new(dir.path());
    journals.create_dirs().unwrap();
    let turns = |journals: &JournalDir| journals.sessions_with(false).unwrap()[0].turns;
    let open = open("S", 1);
    let CatalogEntry::Open { segment, .. } = &open else {
        unreachable!()
    };
    std::fs::create_dir_all(journals.session_dir("S")).unwrap();
    std::fs::write(dir.path().join(segment), b"").unwrap();
    journals.append_catalog(&open).unwrap();
    // An entry written before the count existed stands for one turn.
    std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("catalog.ndjson"))
        .unwrap()
        .write_all(b"{\"ev\":\"turnended\",\"session\":\"S\",\"t\":2}\n")
        .unwrap();
    journals
        .append_catalog(&CatalogEntry::TurnEnded {
            session: "S".into(),
            turns: 3,
            t: 3,
        })
        .unwrap();
    assert_eq!(turns(&journals), 4, "counted while the segment is open");
    journals
        .append_catalog(&CatalogEntry::Close {
            segment: segment.clone(),
            records: 10,
            bytes: 0,
            turns: 4,
            t: 4,
        })
        .unwrap();
    assert_eq!(
        turns(&journals),
        4,
        "the close's count replaces the live one"
    );
}

#[test]
fn a_proxys_end_is_not_its_sessions_last_activity() {
    let mut summaries = Summaries::default();
    for (session, ended) in [("a", 10), ("b", 20)] {
        let open = open(session, 1);
        let CatalogEntry::Open { segment, .. } = &open else {
            unreachable!()
        };
        let segment = segment.clone();
        summaries.apply(open);
        summaries.apply(CatalogEntry::TurnEnded {
            session: session.into(),
            turns: 1,
            t: ended,
        });
        summaries.apply(CatalogEntry::Close {
            segment,
            records: 3,
            bytes: 0,
            turns: 1,
            t: 100,
        });
    }
    // Without turn ends: an empty session's last activity is its start; an old catalog's
    // turns are dated by the close.
    let empty = open("c", 1);
    let CatalogEntry::Open { segment, .. } = &empty else {
        unreachable!()
    };
    let segment = segment.clone();
    summaries.apply(empty);
    summaries.apply(CatalogEntry::Close {
        segment,
        records: 1,
        bytes: 0,
        turns: 0,
        t: 100,
    });
    let old = open("d", 2);
    let CatalogEntry::Open { segment, .. } = &old else {
        unreachable!()
    };
    let segment = segment.clone();
    summaries.apply(old);
    summaries.apply(CatalogEntry::Close {
        segment,
        records: 9,
        bytes: 0,
        turns: 2,
        t: 100,
    });
    let updated = |s: &str| summaries.by_id[s].updated;
    assert_eq!(
        (updated("a"), updated("b"), updated("c"), updated("d")),
        (10, 20, 1, 100)
    );
}

#[test]
fn the_git_branch_comes_from_head_or_a_worktree_link() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("src/deep")).unwrap();
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/feature/x\n").unwrap();
    assert_eq!(
        git_branch(&repo.join("src/deep")).as_deref(),
        Some("feature/x")
    );
    let worktree = dir.path().join("wt");
    let gitdir = repo.join(".git/worktrees/wt");
    std::fs::create_dir_all(&gitdir).unwrap();
    std::fs::create_dir_all(&worktree).unwrap();
    std::fs::write(gitdir.join("HEAD"), "ref: refs/heads/other\n").unwrap();
    std::fs::write(
        worktree.join(".git"),
        format!("gitdir: {}\n", gitdir.display()),
    )
    .unwrap();
    assert_eq!(git_branch(&worktree).as_deref(), Some("other"));
    std::fs::write(repo.join(".git/HEAD"), "0123456789abcdef\n").unwrap();
    assert_eq!(git_branch(&repo), None, "a detached head has no branch");
}

#[test]
fn a_store_sessions_state_is_what_the_catalogs_say_of_its_runs() {
    let mut summaries = Summaries::default();
    let state = |session: &str, state: &str, t| CatalogEntry::State {
        session: session.into(),
        state: state.into(),
        t,
    };
    let close = |opened: &CatalogEntry, t| {
        let CatalogEntry::Open { segment, .. } = opened else {
            unreachable!()
        };
        CatalogEntry::Close {
            segment: segment.clone(),
            records: 1,
            bytes: 0,
            turns: 0,
            t,
        }
    };
    let (closed, first_run, second_run) =
        (open("closed", 4), open("stranded", 5), open("stranded", 6));
    for entry in [
        open("live", 1),
        state("live", "running", 7),
        open("waiting", 2),
        state("waiting", "requires_action", 8),
        open("idle", 3),
        state("idle", "running", 9),
        state("idle", "idle", 10),
        open("new", 11),
        closed.clone(),
        state("closed", "running", 12),
        close(&closed, 13),
        // Its first run killed (never closed), continued, and the second run closed.
        first_run,
        second_run.clone(),
        close(&second_run, 14),
    ] {
        summaries.apply(entry);
    }
    let states: std::collections::BTreeMap<&str, &str> = summaries
        .by_id
        .iter()
        .map(|(id, s)| (id.as_str(), s.store_state()))
        .collect();
    assert_eq!(
        states,
        std::collections::BTreeMap::from([
            ("closed", "closed"),
            ("idle", "idle"),
            ("live", "live"),
            ("new", "idle"),
            ("stranded", "stranded"),
            ("waiting", "live"),
        ])
    );
    assert!(states.values().all(|s| STORE_STATES.contains(s)));
}

#[test]
fn entries_held_list_as_a_catalog_of_them_lists() {
    let dir = tempfile::tempdir().unwrap();
    let copy = JournalDir::mirror(dir.path());
    copy.create_dirs().unwrap();
    let closed = match open("a", 1) {
        CatalogEntry::Open { segment, .. } => segment,
        _ => unreachable!(),
    };
    let entries = vec![
        open("a", 1),
        open("b", 2),
        CatalogEntry::Prompt {
            session: "a".into(),
            title: "first".into(),
            t: 3,
        },
        CatalogEntry::TurnEnded {
            session: "b".into(),
            turns: 2,
            t: 4,
        },
        CatalogEntry::Close {
            segment: closed,
            records: 7,
            bytes: 70,
            turns: 1,
            t: 5,
        },
        CatalogEntry::Delete {
            session: "b".into(),
            t: 6,
        },
        // Another session's segment is never this one's.
        CatalogEntry::Open {
            session: "c".into(),
            segment: "sessions/x/1.acpj.zst".into(),
            cwd: None,
            agent: None,
            agent_name: None,
            git_branch: None,
            t: 7,
            agent_info: None,
        },
    ];
    copy.append_catalog_entries(&entries).unwrap();
    let read = copy.sessions_with(false).unwrap();
    assert_eq!(read.len(), 2, "{read:?}");
    assert_eq!(copy.sessions_of(entries), read);
}
