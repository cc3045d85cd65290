//! The typed column model every table is written through, and the formats
//! that write it: CSV, JSON lines and Parquet.
//!
//! A table is a list of [`Column`]s and rows of cells pushed into a [`Sink`]
//! in column order. Each format's [`Writer`] makes sinks for batches of rows
//! (on any thread: the `steps` table fills them on every core) and writes
//! the batches in order. A null cell (a missing value, a metric the worker
//! cannot measure, NaN) is an empty CSV field, JSON `null` and a Parquet null.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result};
use serde::Serialize;

use super::cell::{hex_digits, Cell, Row};

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Type {
    /// UTF-8 text.
    Text,
    /// A 64-bit signed integer.
    Int,
    /// A 64-bit float.
    Float,
    /// `true` or `false`.
    Bool,
}

impl Type {
    /// The name the schema documents.
    pub fn name(self) -> &'static str {
        match self {
            Type::Text => "text",
            Type::Int => "int",
            Type::Float => "float",
            Type::Bool => "bool",
        }
    }
}

/// One column of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Column {
    /// Its name, as the header, JSON key and Parquet field read.
    pub name: String,
    /// What it holds.
    #[serde(rename = "type")]
    pub ty: Type,
    /// What it means.
    pub meaning: String,
}

impl Column {
    pub fn new(name: impl Into<String>, ty: Type, meaning: impl Into<String>) -> Column {
        Column {
            name: name.into(),
            ty,
            meaning: meaning.into(),
        }
    }
}

/// The formats `kiln export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// CSV with a header row (RFC 4180 quoting); null is an empty field.
    #[default]
    Csv,
    /// Parquet (one row group per 64 k rows, Snappy-compressed); binary.
    Parquet,
    /// One JSON object per line, keyed by column; null is `null`.
    Jsonl,
}

impl Format {
    /// The file extension of the format.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Parquet => "parquet",
            Format::Jsonl => "jsonl",
        }
    }

    /// Whether the format is binary (never written to a terminal).
    pub fn is_binary(self) -> bool {
        self == Format::Parquet
    }
}

/// Receives the cells of rows, in column order.
pub(super) trait Sink: Send {
    fn text(&mut self, v: &str);
    fn int(&mut self, v: i64);
    /// A float; NaN is null.
    fn float(&mut self, v: f64);
    fn bool(&mut self, v: bool);
    fn null(&mut self);
    /// Ends the row.
    fn end(&mut self);

    /// An unsigned integer (stored as a signed one: counts, ns and Unix ms fit).
    fn uint(&mut self, v: u64) {
        self.int(i64::try_from(v).unwrap_or(i64::MAX));
    }
    /// Floats one after another.
    fn floats(&mut self, values: &[f64]) {
        for v in values {
            self.float(*v);
        }
    }
    /// `n` null cells.
    fn nulls(&mut self, n: usize) {
        for _ in 0..n {
            self.null();
        }
    }
    /// Lower-case hex digits of bytes, a text cell.
    fn hex(&mut self, bytes: &[u8]) {
        let mut digits = Vec::with_capacity(2 * bytes.len());
        hex_digits(bytes, &mut digits);
        self.text(std::str::from_utf8(&digits).expect("hex digits are ASCII"));
    }
}

/// Optional cells: null for `None`.
pub(super) trait SinkExt: Sink {
    fn opt_int(&mut self, v: Option<impl Into<i64>>) {
        match v {
            Some(v) => self.int(v.into()),
            None => self.null(),
        }
    }
    fn opt_uint(&mut self, v: Option<u64>) {
        match v {
            Some(v) => self.uint(v),
            None => self.null(),
        }
    }
    fn opt_float(&mut self, v: Option<f64>) {
        match v {
            Some(v) => self.float(v),
            None => self.null(),
        }
    }
    fn opt_bool(&mut self, v: Option<bool>) {
        match v {
            Some(v) => self.bool(v),
            None => self.null(),
        }
    }
    fn opt_text(&mut self, v: Option<&str>) {
        match v {
            Some(v) => self.text(v),
            None => self.null(),
        }
    }
}

impl<S: Sink + ?Sized> SinkExt for S {}

/// Writes batches of rows in one format.
pub(super) trait Writer {
    /// A batch of rows.
    type Rows: Sink;
    /// Makes empty batches, on any thread.
    fn maker(&self) -> Arc<dyn Fn() -> Self::Rows + Send + Sync>;
    /// Writes a batch after those written before; returns its rows.
    fn write(&mut self, rows: Self::Rows) -> Result<u64>;
    /// Ends the table.
    fn finish(self) -> Result<()>;
}

/// Rows pushed one at a time, written in batches of `BATCH`.
pub(super) struct Batched<'w, W: Writer> {
    writer: &'w mut W,
    maker: Arc<dyn Fn() -> W::Rows + Send + Sync>,
    rows: W::Rows,
    pending: usize,
    written: u64,
}

/// Rows per batch of [`Batched`].
const BATCH: usize = 8192;

impl<'w, W: Writer> Batched<'w, W> {
    pub(super) fn new(writer: &'w mut W) -> Self {
        let maker = writer.maker();
        let rows = maker();
        Batched {
            writer,
            maker,
            rows,
            pending: 0,
            written: 0,
        }
    }

    /// The row being filled.
    pub(super) fn row(&mut self) -> &mut W::Rows {
        &mut self.rows
    }

    /// Ends the row; writes the batch when it is full.
    pub(super) fn end(&mut self) -> Result<()> {
        self.rows.end();
        self.pending += 1;
        if self.pending == BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let rows = std::mem::replace(&mut self.rows, (self.maker)());
        self.written += self.writer.write(rows)?;
        self.pending = 0;
        Ok(())
    }

    /// Writes what is left; returns the rows written.
    pub(super) fn done(&mut self) -> Result<u64> {
        if self.pending > 0 {
            self.flush()?;
        }
        Ok(self.written)
    }
}

// ---- CSV ----------------------------------------------------------------

impl Sink for Row {
    fn text(&mut self, v: &str) {
        self.str(v);
    }
    fn int(&mut self, v: i64) {
        self.cell(v);
    }
    fn uint(&mut self, v: u64) {
        self.cell(v);
    }
    fn float(&mut self, v: f64) {
        if v.is_nan() {
            self.empty();
        } else {
            self.cell(v);
        }
    }
    fn bool(&mut self, v: bool) {
        self.cell(v);
    }
    fn null(&mut self) {
        self.empty();
    }
    fn end(&mut self) {
        Row::end(self);
    }
    fn floats(&mut self, values: &[f64]) {
        Row::floats(self, values);
    }
    fn nulls(&mut self, n: usize) {
        Row::empties(self, n);
    }
    fn hex(&mut self, bytes: &[u8]) {
        Row::hex(self, bytes);
    }
}

/// CSV: the header, then rows as the `csv` crate writes them.
pub(super) struct CsvWriter<W> {
    out: W,
}

impl<W: Write> CsvWriter<W> {
    pub(super) fn new(columns: &[Column], mut out: W) -> Result<Self> {
        let mut header = Row::new(Vec::new());
        for c in columns {
            header.str(&c.name);
        }
        Row::end(&mut header);
        out.write_all(&header.bytes)?;
        Ok(CsvWriter { out })
    }
}

impl<W: Write> Writer for CsvWriter<W> {
    type Rows = Row;
    fn maker(&self) -> Arc<dyn Fn() -> Row + Send + Sync> {
        Arc::new(|| Row::new(Vec::with_capacity(64 * 1024)))
    }
    fn write(&mut self, rows: Row) -> Result<u64> {
        self.out.write_all(&rows.bytes)?;
        Ok(rows.rows())
    }
    fn finish(mut self) -> Result<()> {
        self.out.flush().context("cannot write the CSV")
    }
}

// ---- JSON lines ---------------------------------------------------------

/// JSON objects, one per line.
pub(super) struct JsonRows {
    /// Each column's `"name":`, quoted once.
    keys: Arc<[Vec<u8>]>,
    bytes: Vec<u8>,
    col: usize,
    rows: u64,
}

impl JsonRows {
    fn key(&mut self) {
        self.bytes.push(if self.col == 0 { b'{' } else { b',' });
        let key = &self.keys[self.col];
        self.bytes.extend_from_slice(key);
        self.col += 1;
    }
}

impl Sink for JsonRows {
    fn text(&mut self, v: &str) {
        self.key();
        serde_json::to_writer(&mut self.bytes, v).expect("a string serializes");
    }
    fn int(&mut self, v: i64) {
        self.key();
        v.write(&mut self.bytes);
    }
    fn float(&mut self, v: f64) {
        self.key();
        if v.is_finite() {
            self.bytes
                .extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes());
        } else {
            // JSON has no NaN or infinity.
            self.bytes.extend_from_slice(b"null");
        }
    }
    fn bool(&mut self, v: bool) {
        self.key();
        v.write(&mut self.bytes);
    }
    fn null(&mut self) {
        self.key();
        self.bytes.extend_from_slice(b"null");
    }
    fn end(&mut self) {
        if self.col == 0 {
            self.bytes.push(b'{');
        }
        self.bytes.extend_from_slice(b"}\n");
        self.col = 0;
        self.rows += 1;
    }
}

pub(super) struct JsonlWriter<W> {
    keys: Arc<[Vec<u8>]>,
    out: W,
}

impl<W: Write> JsonlWriter<W> {
    pub(super) fn new(columns: &[Column], out: W) -> Self {
        let keys = columns
            .iter()
            .map(|c| {
                let mut key = serde_json::to_vec(&c.name).expect("a string serializes");
                key.push(b':');
                key
            })
            .collect();
        JsonlWriter { keys, out }
    }
}

impl<W: Write> Writer for JsonlWriter<W> {
    type Rows = JsonRows;
    fn maker(&self) -> Arc<dyn Fn() -> JsonRows + Send + Sync> {
        let keys = self.keys.clone();
        Arc::new(move || JsonRows {
            keys: keys.clone(),
            bytes: Vec::with_capacity(64 * 1024),
            col: 0,
            rows: 0,
        })
    }
    fn write(&mut self, rows: JsonRows) -> Result<u64> {
        self.out.write_all(&rows.bytes)?;
        Ok(rows.rows)
    }
    fn finish(mut self) -> Result<()> {
        self.out.flush().context("cannot write the JSON lines")
    }
}

// ---- Constant columns ---------------------------------------------------

/// A cell as compared to find constant columns.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Null,
    Text(String),
    Int(i64),
    /// The float's bits (NaN is null before it gets here).
    Float(u64),
    Bool(bool),
}

/// Finds the columns whose every cell is the same (null included).
pub(super) struct Constants {
    /// Per column: its first cell, and whether every later one equalled it.
    first: Vec<Option<(Seen, bool)>>,
    col: usize,
}

impl Constants {
    pub(super) fn new(columns: usize) -> Constants {
        Constants {
            first: vec![None; columns],
            col: 0,
        }
    }

    fn see(&mut self, cell: Seen) {
        match &mut self.first[self.col] {
            slot @ None => *slot = Some((cell, true)),
            Some((first, constant)) => *constant &= *first == cell,
        }
        self.col += 1;
    }

    /// Per column: whether it varies (a table without rows has none that do).
    pub(super) fn varying(&self) -> Vec<bool> {
        self.first
            .iter()
            .map(|f| matches!(f, Some((_, false))))
            .collect()
    }
}

impl Sink for Constants {
    fn text(&mut self, v: &str) {
        // Cheap where a column is already known to vary.
        match &self.first[self.col] {
            Some((_, false)) => self.col += 1,
            _ => self.see(Seen::Text(v.to_string())),
        }
    }
    fn int(&mut self, v: i64) {
        self.see(Seen::Int(v));
    }
    fn float(&mut self, v: f64) {
        self.see(if v.is_nan() {
            Seen::Null
        } else {
            Seen::Float(v.to_bits())
        });
    }
    fn bool(&mut self, v: bool) {
        self.see(Seen::Bool(v));
    }
    fn null(&mut self) {
        self.see(Seen::Null);
    }
    fn end(&mut self) {
        self.col = 0;
    }
}

/// A writer that sees every row but only finds the constant columns.
pub(super) struct ConstantsWriter {
    columns: usize,
    found: Constants,
}

impl ConstantsWriter {
    pub(super) fn new(columns: usize) -> Self {
        ConstantsWriter {
            columns,
            found: Constants::new(columns),
        }
    }

    pub(super) fn varying(&self) -> Vec<bool> {
        self.found.varying()
    }
}

impl Writer for ConstantsWriter {
    type Rows = Rows<Constants>;
    fn maker(&self) -> Arc<dyn Fn() -> Self::Rows + Send + Sync> {
        let n = self.columns;
        Arc::new(move || Rows {
            inner: Constants::new(n),
            rows: 0,
        })
    }
    fn write(&mut self, rows: Self::Rows) -> Result<u64> {
        for (mine, theirs) in self.found.first.iter_mut().zip(rows.inner.first) {
            match (mine.as_mut(), theirs) {
                (_, None) => {}
                (None, theirs) => *mine = theirs,
                (Some((first, constant)), Some((other, also))) => {
                    *constant &= also && *first == other;
                }
            }
        }
        Ok(rows.rows)
    }
    fn finish(self) -> Result<()> {
        Ok(())
    }
}

/// A sink that counts its rows.
pub(super) struct Rows<S> {
    inner: S,
    rows: u64,
}

impl<S: Sink> Sink for Rows<S> {
    fn text(&mut self, v: &str) {
        self.inner.text(v);
    }
    fn int(&mut self, v: i64) {
        self.inner.int(v);
    }
    fn float(&mut self, v: f64) {
        self.inner.float(v);
    }
    fn bool(&mut self, v: bool) {
        self.inner.bool(v);
    }
    fn null(&mut self) {
        self.inner.null();
    }
    fn end(&mut self) {
        self.inner.end();
        self.rows += 1;
    }
}

// ---- Dropping columns ---------------------------------------------------

/// A sink that passes on the cells of the kept columns only.
pub(super) struct Masked<S> {
    inner: S,
    keep: Arc<[bool]>,
    col: usize,
}

impl<S> Masked<S> {
    fn next(&mut self) -> bool {
        let keep = self.keep[self.col];
        self.col += 1;
        keep
    }
}

impl<S: Sink> Sink for Masked<S> {
    fn text(&mut self, v: &str) {
        if self.next() {
            self.inner.text(v);
        }
    }
    fn int(&mut self, v: i64) {
        if self.next() {
            self.inner.int(v);
        }
    }
    fn uint(&mut self, v: u64) {
        if self.next() {
            self.inner.uint(v);
        }
    }
    fn float(&mut self, v: f64) {
        if self.next() {
            self.inner.float(v);
        }
    }
    fn bool(&mut self, v: bool) {
        if self.next() {
            self.inner.bool(v);
        }
    }
    fn null(&mut self) {
        if self.next() {
            self.inner.null();
        }
    }
    fn end(&mut self) {
        self.col = 0;
        self.inner.end();
    }
}

/// A writer of the kept columns only.
pub(super) struct MaskedWriter<W> {
    inner: W,
    keep: Arc<[bool]>,
}

impl<W: Writer> MaskedWriter<W> {
    pub(super) fn new(inner: W, keep: Vec<bool>) -> Self {
        MaskedWriter {
            inner,
            keep: keep.into(),
        }
    }
}

impl<W: Writer> Writer for MaskedWriter<W>
where
    W::Rows: 'static,
{
    type Rows = Masked<W::Rows>;
    fn maker(&self) -> Arc<dyn Fn() -> Self::Rows + Send + Sync> {
        let (inner, keep) = (self.inner.maker(), self.keep.clone());
        Arc::new(move || Masked {
            inner: inner(),
            keep: keep.clone(),
            col: 0,
        })
    }
    fn write(&mut self, rows: Self::Rows) -> Result<u64> {
        self.inner.write(rows.inner)
    }
    fn finish(self) -> Result<()> {
        self.inner.finish()
    }
}
