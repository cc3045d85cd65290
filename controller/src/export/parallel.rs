//! An ordered writer fed by every core: batches of rows made in parallel,
//! written in order.

use std::collections::BTreeMap;

use anyhow::Result;

use super::format::Writer;

/// Stored steps per chunk of [`parallel_rows`].
const CHUNK: usize = 256;

/// Writes one row per stored value with `row` (which ends it), in the
/// values' order: chunks of values are turned into batches of rows on every
/// core while this thread writes them out in order. Chunks in flight are bounded, so memory does not grow
/// with the number of steps.
pub(super) fn parallel_rows<T, W, F>(
    values: impl Iterator<Item = Result<T>> + Send,
    row: &F,
    out: &mut W,
) -> Result<u64>
where
    T: Send,
    W: Writer,
    F: Fn(&T, &mut W::Rows) -> Result<()> + Sync,
{
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::{channel, sync_channel};
    use std::sync::Mutex;

    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let in_flight = 3 * threads;
    let (chunks_tx, chunks_rx) = sync_channel::<(u64, Result<Vec<T>>)>(in_flight);
    let chunks_rx = Mutex::new(chunks_rx);
    let (done_tx, done_rx) = channel::<(u64, Result<W::Rows>)>();
    let make = out.maker();
    let (tokens_tx, tokens_rx) = sync_channel::<()>(in_flight);
    for _ in 0..in_flight {
        tokens_tx.send(()).expect("room for every token");
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let stop_reading = &stop;
        scope.spawn(move || {
            let mut values = values;
            let mut seq = 0;
            loop {
                if tokens_rx.recv().is_err() || stop_reading.load(Ordering::Relaxed) {
                    return;
                }
                let mut chunk = Vec::with_capacity(CHUNK);
                let mut failed = None;
                for value in values.by_ref().take(CHUNK) {
                    match value {
                        Ok(v) => chunk.push(v),
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                let last = chunk.len() < CHUNK || failed.is_some();
                if chunk.is_empty() && failed.is_none() {
                    return;
                }
                let item = match failed {
                    Some(e) => Err(e),
                    None => Ok(chunk),
                };
                if chunks_tx.send((seq, item)).is_err() || last {
                    return;
                }
                seq += 1;
            }
        });
        for _ in 0..threads {
            let done_tx = done_tx.clone();
            let (chunks_rx, stop, make) = (&chunks_rx, &stop, &make);
            scope.spawn(move || loop {
                let next = chunks_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                let Ok((seq, chunk)) = next else { return };
                let made = chunk.and_then(|chunk| {
                    let mut out = make();
                    if !stop.load(Ordering::Relaxed) {
                        for value in &chunk {
                            row(value, &mut out)?;
                        }
                    }
                    Ok(out)
                });
                if done_tx.send((seq, made)).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        // Write the chunks in order as they come.
        let mut waiting = BTreeMap::new();
        let (mut next, mut rows) = (0u64, 0u64);
        let mut error = None;
        for (seq, made) in done_rx {
            waiting.insert(seq, made);
            while let Some(made) = waiting.remove(&next) {
                next += 1;
                let _ = tokens_tx.send(());
                if error.is_some() {
                    continue;
                }
                let written = made.and_then(|rows| out.write(rows));
                match written {
                    Ok(n) => rows += n,
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        error = Some(e);
                    }
                }
            }
        }
        drop(tokens_tx);
        match error {
            Some(e) => Err(e),
            None => Ok(rows),
        }
    })
}
