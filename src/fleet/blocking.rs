//! Work that takes the processor for a while (parsing a host's catalog, decoding an index
//! part) run on the runtime's blocking threads, so a reading's requests go on being sent and
//! answered meanwhile, and two such pieces of work can take both of a machine's cores.

/// `work`'s answer, computed on a blocking thread of the current runtime; a panic in it is
/// raised again here, as if `work` had run in place.
pub async fn run<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(answer) => answer,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // Only a runtime shutting down drops a blocking task before it runs, and it drops
        // the task waiting for it too.
        Err(e) => panic!("a blocking task did not run: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_work_answers_and_its_panic_is_raised_again() {
        assert_eq!(run(|| 6 * 7).await, 42);
        let raised = tokio::spawn(run(|| -> u8 { panic!("bad part") })).await;
        let panic = raised.unwrap_err().into_panic();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"bad part"));
    }
}
