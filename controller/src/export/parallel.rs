//! An ordered writer fed by every core: batches of rows made in parallel,
//! written in order.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::Mutex;

use anyhow::Result;

use super::format::Writer;

/// Stored steps per chunk of [`parallel_rows`].
const CHUNK: usize = 256;

/// A chunk of values, numbered in the values' order.
type Chunk<T> = (u64, Result<Vec<T>>);

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
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let in_flight = 3 * threads;
    let (chunks_tx, chunks_rx) = sync_channel::<Chunk<T>>(in_flight);
    let chunks_rx = Mutex::new(chunks_rx);
    let (done_tx, done_rx) = channel::<(u64, Result<W::Rows>)>();
    let make = out.maker();
    // A token per chunk in flight: the reader takes one per chunk, the writer gives it back.
    let (tokens_tx, tokens_rx) = sync_channel::<()>(in_flight);
    for _ in 0..in_flight {
        tokens_tx.send(()).expect("room for every token");
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let stop_reading = &stop;
        scope.spawn(move || read_chunks(values, tokens_rx, stop_reading, chunks_tx));
        for _ in 0..threads {
            let done_tx = done_tx.clone();
            let (chunks_rx, stop, make) = (&chunks_rx, &stop, &make);
            scope.spawn(move || make_batches(chunks_rx, stop, &**make, row, done_tx));
        }
        drop(done_tx);
        write_in_order(done_rx, tokens_tx, &stop, out)
    })
}

/// Reads the values a chunk per token, numbered in order, until the last chunk (a short
/// one, or an error), the tokens end, or the writer stops.
fn read_chunks<T>(
    mut values: impl Iterator<Item = Result<T>>,
    tokens_rx: Receiver<()>,
    stop: &AtomicBool,
    chunks_tx: SyncSender<Chunk<T>>,
) {
    let mut seq = 0;
    loop {
        if tokens_rx.recv().is_err() || stop.load(Ordering::Relaxed) {
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
}

/// Turns chunks into batches of rows until the chunks end; once the writer stops, batches
/// are left empty.
fn make_batches<T, R, F>(
    chunks_rx: &Mutex<Receiver<Chunk<T>>>,
    stop: &AtomicBool,
    make: &(dyn Fn() -> R + Send + Sync),
    row: &F,
    done_tx: Sender<(u64, Result<R>)>,
) where
    F: Fn(&T, &mut R) -> Result<()>,
{
    loop {
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
    }
}

/// Writes the batches in order as they come, giving back a token for each; after an error
/// tells the others to stop and writes no more. The rows written, or the first error.
fn write_in_order<W: Writer>(
    done_rx: Receiver<(u64, Result<W::Rows>)>,
    tokens_tx: SyncSender<()>,
    stop: &AtomicBool,
    out: &mut W,
) -> Result<u64> {
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
}
