//! The bodies of kiln's fuzz targets, one per reader of untrusted input.
//!
//! Each takes arbitrary bytes, reads them as its reader would, and checks
//! what it read where that is cheap (printed forms read back equal, frames
//! re-encode), panicking on any failure. The cargo-fuzz targets in `fuzz/libfuzzer`
//! (nightly, libFuzzer) are one-line wrappers of these, and the corpus replay
//! test runs the kept corpora through them on stable, so both run the same
//! checks.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Debug;

use kiln_protocol::decision::{DecisionPoint, DecisionSet, DecisionValue, SiteId};
use kiln_protocol::frame::{self, MAX_FRAME};
use kiln_protocol::message::{self, Request, Response};
use kiln_protocol::{sexp, CampaignConfig, DecisionFile};
use kiln_worker::build::llvm_inline::{self, InlineRemark, MissedRemark};
use kiln_worker::discover::features::{self, ir, Evidence};
use kiln_worker::measure::callgrind::{self, Profile};
use kiln_worker::measure::code::Code;
use serde::{de::DeserializeOwned, Serialize};

/// A target's body: reads the bytes, panics on a failed check.
pub type Body = fn(&[u8]);

/// Every target by name: the name is its folder under `fuzz/corpus/`.
pub const TARGETS: &[(&str, Body)] = &[
    ("sexp", sexp),
    ("config", config),
    ("decision_file", decision_file),
    ("frame", frame),
    ("remarks", remarks),
    ("ir", ir),
    ("callgrind", callgrind),
    ("objdump", objdump),
];

/// The bytes as text. kiln reads configs, decision files, IR and profiles as
/// UTF-8 (refusing anything else before parsing) and compiler output lossily,
/// so the lossy text is an input every text reader can meet.
fn text(data: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// The s-expression reader: every datum it reads prints to text that reads
/// back as the same datum, and every error is located inside the text.
pub fn sexp(data: &[u8]) {
    let text = text(data);
    let document = match sexp::parse_document(&text, "fuzz") {
        Ok(document) => document,
        Err(e) => {
            let lines = text.split('\n').count();
            assert!(
                (1..=lines).contains(&e.pos.line),
                "error outside the text's {lines} lines: {e}"
            );
            return;
        }
    };
    for node in &document {
        let printed = node.to_string();
        let again = sexp::parse_single(&printed, "printed")
            .unwrap_or_else(|e| panic!("the printed datum does not read back: {e}\n{printed}"));
        assert_eq!(
            again.without_positions(),
            node.without_positions(),
            "the printed datum reads back as another:\n{printed}"
        );
    }
}

/// Config decoding: a config that parses prints to its normalized text,
/// which parses back to an equal config and prints the same; its JSON (in
/// step requests and the store) reads back equal too.
pub fn config(data: &[u8]) {
    let Ok(config) = CampaignConfig::parse(&text(data), "fuzz") else {
        return;
    };
    let printed = config.to_text();
    let again = CampaignConfig::parse(&printed, "printed")
        .unwrap_or_else(|e| panic!("the normalized config does not parse: {e}\n{printed}"));
    assert_eq!(
        again, config,
        "the normalized config reads back as another:\n{printed}"
    );
    assert_eq!(
        again.to_text(),
        printed,
        "normalizing twice changes the text"
    );
    json_round_trip(&config);
    config.limits_in_use();
}

/// Decision files: a file that parses prints (as a file and as one
/// s-expression) to text that parses back equal, with the same hash; it passes
/// the check against the points it names itself, and a file with decisions
/// fails the check against no points.
pub fn decision_file(data: &[u8]) {
    let text = text(data);
    let Ok(file) = DecisionFile::parse(&text, "fuzz") else {
        return;
    };
    for printed in [file.to_text(), file.to_sexp().to_string()] {
        let again = DecisionFile::parse(&printed, "printed")
            .unwrap_or_else(|e| panic!("the printed file does not parse: {e}\n{printed}"));
        assert_eq!(
            again, file,
            "the printed file reads back as another:\n{printed}"
        );
        assert_eq!(again.set.hash(), file.set.hash());
    }
    let own: Vec<DecisionPoint> = file
        .set
        .0
        .iter()
        .map(|(id, value)| DecisionPoint {
            id: id.clone(),
            domain: vec![value.clone()],
        })
        .collect();
    if let Err(e) = DecisionFile::parse_checked(&text, "fuzz", &own) {
        panic!("the file fails the check against its own decisions: {e}");
    }
    let against_none = DecisionFile::parse_checked(&text, "fuzz", &[]);
    assert_eq!(against_none.is_ok(), file.set.is_empty());
    json_round_trip(&file.set);
}

/// The frame decoder: the bytes as a stream of length-prefixed frames, and as
/// one payload; every request or response decoded re-encodes to a frame that
/// reads back equal.
pub fn frame(data: &[u8]) {
    let mut stream = data;
    while let Ok(payload) = frame::read_payload(&mut stream, MAX_FRAME) {
        assert!(payload.len() <= MAX_FRAME);
        request(&payload);
        response(&payload);
    }
    request(data);
    response(data);
}

fn request(payload: &[u8]) {
    let Some(request) = frame_round_trip::<Request>(payload) else {
        return;
    };
    message::request_name(&request);
    let _ = message::check_hello(&request);
    if let Request::BundlePart(part) = &request {
        // A part's files as a bundle: checked and cut into parts again.
        let bundle = kiln_protocol::bundle::Bundle::new(part.files.clone());
        let _ = bundle.validate();
        let _ = bundle.parts();
    }
}

fn response(payload: &[u8]) {
    let Some(response) = frame_round_trip::<Response>(payload) else {
        return;
    };
    if let Response::StepDone(result) = &response {
        let _ = result.measurement.outcome.reason();
        let _ = result.measurement.cut_short.map(|c| c.runs_saved());
    }
}

/// The message a payload decodes to, after checking that it re-encodes to a
/// frame that reads back equal.
fn frame_round_trip<T>(payload: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let msg: T = frame::decode(payload).ok()?;
    let encoded = frame::encode(&msg);
    let again: T = frame::read_frame(&mut &encoded[..], MAX_FRAME)
        .unwrap_or_else(|e| panic!("a decoded message does not read back: {e}\n{msg:?}"));
    assert_eq!(again, msg, "a decoded message reads back as another");
    Some(msg)
}

fn json_round_trip<T>(value: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let json = serde_json::to_string(value).expect("serializes");
    let again: T =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("the JSON does not read back: {e}"));
    assert_eq!(&again, value, "the JSON reads back as another");
}

/// The inline remark parsers: every site read turns into a replay line that
/// reads back as the same site and decision, and discovery, verification and
/// features take what was read.
pub fn remarks(data: &[u8]) {
    let text = text(data);
    let remarks = llvm_inline::parse_remarks(&text);
    let missed = llvm_inline::parse_missed_remarks(&text);
    llvm_inline::strip_remarks(&text);
    for remark in &remarks {
        let value = if remark.inlined {
            DecisionValue::inline()
        } else {
            DecisionValue::no_inline()
        };
        let set = DecisionSet(BTreeMap::from([(remark.site.clone(), value)]));
        let replay = llvm_inline::replay_file_text(&set);
        let back = llvm_inline::parse_remarks(&replay);
        assert!(
            matches!(back.as_slice(), [r] if r.site == remark.site && r.inlined == remark.inlined),
            "site '{}' does not read back from its replay line {replay:?}: {back:?}",
            remark.site
        );
    }
    site_features(&remarks, &missed, None, None, None);
}

/// The IR reader: a unit read twice defines the same functions (the second
/// copy of a function is skipped, as a header's inline function is), and
/// features take its calls.
pub fn ir(data: &[u8]) {
    let text = text(data);
    let mut program = ir::Program::default();
    program.add_unit(&text);
    let functions = program.functions.clone();
    program.add_unit(&text);
    assert_eq!(program.functions, functions);
    for f in functions.values() {
        assert!(f.blocks >= 1, "a function without an entry block");
    }
    site_features(&[], &[], Some(&program), None, None);
}

/// The callgrind profile parser: a function's own instructions are part of
/// its inclusive ones, and features take the profile.
pub fn callgrind(data: &[u8]) {
    let text = text(data);
    let profile = Profile::parse(&text);
    callgrind::parse_total(&text);
    for (name, cost) in &profile.functions {
        assert!(
            cost.self_ir <= cost.inclusive_ir,
            "'{name}': self cost {} above inclusive {}",
            cost.self_ir,
            cost.inclusive_ir
        );
    }
    site_features(&[], &[], None, Some(&profile), None);
}

/// The disassembly reader: a function's vector instructions, calls and loops are among its
/// instructions, and features take the code.
pub fn objdump(data: &[u8]) {
    let Some(code) = Code::parse(&text(data)) else {
        return;
    };
    for (name, f) in &code.functions {
        assert!(
            f.vector.max(f.calls).max(f.loops) <= f.instructions,
            "'{name}': {f:?}"
        );
    }
    site_features(&[], &[], None, None, Some(&code));
}

/// Features of every site the evidence names: those of the remarks, the IR's
/// calls, the profile's calls (as flat sites at the call's line) and each
/// function of the code calling itself.
fn site_features(
    remarks: &[InlineRemark],
    missed: &[MissedRemark],
    ir: Option<&ir::Program>,
    profile: Option<&Profile>,
    code: Option<&Code>,
) {
    let ids = remarks
        .iter()
        .map(|r| r.site.clone())
        .chain(ir.iter().flat_map(|p| p.calls.keys().cloned().map(SiteId)))
        .chain(profile.iter().flat_map(|p| {
            p.calls
                .keys()
                .map(|k| SiteId(format!("{} @ {}:{}:0", k.callee, k.caller, k.line)))
        }))
        .chain(
            code.iter()
                .flat_map(|c| c.functions.keys().map(|f| SiteId(format!("{f} @ {f}:1:0")))),
        );
    let points: Vec<DecisionPoint> = ids.map(DecisionPoint::inline_site).collect();
    let discovery = llvm_inline::discovery_from_remarks(remarks, remarks);
    llvm_inline::verify(&discovery.baseline, remarks);
    let evidence = Evidence {
        discovery: remarks,
        stock: remarks,
        missed,
        ir,
        profile,
        uninlined: profile,
        code,
        inlined_code: code,
    };
    features::site_features(&points, &discovery.baseline, &evidence);
}
