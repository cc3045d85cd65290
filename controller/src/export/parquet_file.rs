//! Parquet through the Apache Arrow crates: each batch of rows becomes an
//! Arrow record batch, typed by the table's columns.

use std::io::Write;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder,
};
use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use super::format::{Column, Sink, Type, Writer};

/// Rows per Parquet row group.
const ROW_GROUP: usize = 64 * 1024;

/// One column's cells of a batch.
enum Builder {
    Text(StringBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Bool(BooleanBuilder),
}

impl Builder {
    fn of(ty: Type) -> Builder {
        match ty {
            Type::Text => Builder::Text(StringBuilder::new()),
            Type::Int => Builder::Int(Int64Builder::new()),
            Type::Float => Builder::Float(Float64Builder::new()),
            Type::Bool => Builder::Bool(BooleanBuilder::new()),
        }
    }

    fn null(&mut self) {
        match self {
            Builder::Text(b) => b.append_null(),
            Builder::Int(b) => b.append_null(),
            Builder::Float(b) => b.append_null(),
            Builder::Bool(b) => b.append_null(),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Text(b) => Arc::new(b.finish()),
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
        }
    }

    fn len(&self) -> usize {
        match self {
            Builder::Text(b) => b.len(),
            Builder::Int(b) => b.len(),
            Builder::Float(b) => b.len(),
            Builder::Bool(b) => b.len(),
        }
    }
}

/// A batch of rows, column by column.
pub(super) struct ArrowRows {
    columns: Vec<Builder>,
    col: usize,
    rows: usize,
}

impl ArrowRows {
    /// The current column; a cell of another type than the column's is a
    /// table that disagrees with its own schema, a bug.
    fn next(&mut self) -> &mut Builder {
        let b = &mut self.columns[self.col];
        self.col += 1;
        b
    }
}

fn mismatch(col: usize, cell: &str) -> ! {
    panic!("export: column {col} is given a {cell} cell, which its type does not hold")
}

impl Sink for ArrowRows {
    fn text(&mut self, v: &str) {
        let col = self.col;
        match self.next() {
            Builder::Text(b) => b.append_value(v),
            _ => mismatch(col, "text"),
        }
    }
    fn int(&mut self, v: i64) {
        let col = self.col;
        match self.next() {
            Builder::Int(b) => b.append_value(v),
            _ => mismatch(col, "int"),
        }
    }
    fn float(&mut self, v: f64) {
        let col = self.col;
        match self.next() {
            Builder::Float(b) if v.is_nan() => b.append_null(),
            Builder::Float(b) => b.append_value(v),
            _ => mismatch(col, "float"),
        }
    }
    fn bool(&mut self, v: bool) {
        let col = self.col;
        match self.next() {
            Builder::Bool(b) => b.append_value(v),
            _ => mismatch(col, "bool"),
        }
    }
    fn null(&mut self) {
        self.next().null();
    }
    fn end(&mut self) {
        debug_assert!(self.columns.iter().all(|b| b.len() == self.rows + 1));
        self.col = 0;
        self.rows += 1;
    }
}

/// The bytes the Arrow writer has encoded and [`ParquetWriter`] not yet
/// passed on: the Arrow writer wants a writer it may send between threads,
/// which standard output's lock is not.
#[derive(Clone, Default)]
struct Encoded(Arc<Mutex<Vec<u8>>>);

impl Write for Encoded {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Parquet, written as batches come: each row group's bytes are passed on
/// to `out` once encoded.
pub(super) struct ParquetWriter<W: Write> {
    schema: SchemaRef,
    types: Arc<[Type]>,
    arrow: ArrowWriter<Encoded>,
    encoded: Encoded,
    out: W,
}

impl<W: Write> ParquetWriter<W> {
    pub(super) fn new(columns: &[Column], out: W) -> Result<Self> {
        let fields: Vec<Field> = columns
            .iter()
            .map(|c| {
                let ty = match c.ty {
                    Type::Text => DataType::Utf8,
                    Type::Int => DataType::Int64,
                    Type::Float => DataType::Float64,
                    Type::Bool => DataType::Boolean,
                };
                Field::new(&c.name, ty, true)
            })
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_size(ROW_GROUP)
            .build();
        let encoded = Encoded::default();
        let arrow = ArrowWriter::try_new(encoded.clone(), schema.clone(), Some(props))
            .context("cannot start the Parquet file")?;
        Ok(ParquetWriter {
            schema,
            types: columns.iter().map(|c| c.ty).collect(),
            arrow,
            encoded,
            out,
        })
    }

    /// Passes on what is encoded.
    fn pass_on(&mut self) -> Result<()> {
        let bytes = std::mem::take(&mut *self.encoded.0.lock().unwrap_or_else(|p| p.into_inner()));
        self.out
            .write_all(&bytes)
            .context("cannot write the Parquet file")
    }
}

impl<W: Write> Writer for ParquetWriter<W> {
    type Rows = ArrowRows;
    fn maker(&self) -> Arc<dyn Fn() -> ArrowRows + Send + Sync> {
        let types = self.types.clone();
        Arc::new(move || ArrowRows {
            columns: types.iter().map(|t| Builder::of(*t)).collect(),
            col: 0,
            rows: 0,
        })
    }
    fn write(&mut self, mut rows: ArrowRows) -> Result<u64> {
        if rows.rows == 0 {
            return Ok(0);
        }
        let arrays: Vec<ArrayRef> = rows.columns.iter_mut().map(Builder::finish).collect();
        // With every column dropped as constant, the rows are still counted.
        let options = RecordBatchOptions::new().with_row_count(Some(rows.rows));
        let batch = RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)
            .context("a batch of rows does not fit the table's schema")?;
        self.arrow
            .write(&batch)
            .context("cannot write the Parquet file")?;
        self.pass_on()?;
        Ok(rows.rows as u64)
    }
    fn finish(mut self) -> Result<()> {
        self.arrow
            .finish()
            .context("cannot finish the Parquet file")?;
        self.pass_on()?;
        self.out.flush().context("cannot write the Parquet file")
    }
}
