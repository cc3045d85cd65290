//! A clang command that compiles and links in one (`clang -o prog a.c b.c
//! -lm`, as SQLite's makefile builds its benchmark program) split into one
//! compile per source and the link, as clang's driver itself runs it: each
//! source is then a unit of its own, whose object is reused and whose front
//! end runs once ([`super::objects`]). The program is the same, byte for
//! byte: only the objects' names differ, and the link keeps none of them.

use std::ffi::OsString;

use super::objects::is_source;

/// Options after which the one-command compile is left whole: what they
/// mean depends on their place among the sources (`-x`), they write files
/// named after the output (dependency files, saved temporaries), or the
/// command makes no program of its sources' objects.
const WHOLE: &[&str] = &[
    "-c",
    "-S",
    "-E",
    "-M",
    "-MM",
    "-MD",
    "-MMD",
    "-MF",
    "-MT",
    "-MQ",
    "-MP",
    "-x",
    "-",
    "-emit-llvm",
    "-fsyntax-only",
];
const WHOLE_PREFIXES: &[&str] = &["-save-temps", "-flto", "-x", "-MF", "-MT", "-MQ"];

/// Quiets what the compiles say of the link's options and the link of the
/// compiles' (clang's driver, running both from one command, says nothing).
const QUIET: &str = "-Wno-unused-command-line-argument";

/// The commands (arguments after the compiler) a one-command compile and
/// link becomes.
#[derive(Debug, PartialEq)]
pub struct Split {
    /// One per source: the command's options with that source alone, `-c`
    /// and the object's path.
    pub compiles: Vec<Vec<OsString>>,
    /// The command with each source replaced by its object, in place.
    pub link: Vec<OsString>,
}

/// The split of `args`, or None when it is not a compile and link of
/// sources that splitting leaves the same (see [`WHOLE`]).
pub fn of(args: &[OsString]) -> Option<Split> {
    let whole = args.iter().any(|a| {
        let text = a.to_string_lossy();
        WHOLE.contains(&text.as_ref()) || WHOLE_PREFIXES.iter().any(|p| text.starts_with(p))
    });
    let sources: Vec<usize> = (0..args.len()).filter(|&i| is_source(&args[i])).collect();
    if whole || sources.is_empty() {
        return None;
    }
    let out = args.iter().position(|a| a == "-o");
    let output = match out {
        Some(i) => args.get(i + 1)?.to_string_lossy().into_owned(),
        None if args.iter().any(|a| a.to_string_lossy().starts_with("-o")) => return None,
        None => "a.out".to_string(),
    };
    let object = |k: usize| OsString::from(format!("{output}.kiln-unit-{k}.o"));
    let compiles = sources
        .iter()
        .enumerate()
        .map(|(k, &source)| {
            let mut command: Vec<OsString> = args
                .iter()
                .enumerate()
                .filter(|&(i, _)| {
                    !(sources.contains(&i) || out.is_some_and(|o| i == o || i == o + 1))
                })
                .map(|(_, a)| a.clone())
                .collect();
            command.extend([QUIET.into(), "-c".into(), args[source].clone()]);
            command.extend(["-o".into(), object(k)]);
            command
        })
        .collect();
    let mut link: Vec<OsString> = args
        .iter()
        .enumerate()
        .map(|(i, a)| match sources.iter().position(|&s| s == i) {
            Some(k) => object(k),
            None => a.clone(),
        })
        .collect();
    link.push(QUIET.into());
    Some(Split { compiles, link })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_compile_and_link_becomes_one_compile_per_source_and_the_link_in_order() {
        let split = of(&args(&[
            "-O2",
            "-o",
            "speedtest1",
            "speedtest1.c",
            "sqlite3.c",
            "-lm",
        ]))
        .expect("split");
        assert_eq!(
            split.compiles,
            vec![
                args(&[
                    "-O2",
                    "-lm",
                    QUIET,
                    "-c",
                    "speedtest1.c",
                    "-o",
                    "speedtest1.kiln-unit-0.o"
                ]),
                args(&[
                    "-O2",
                    "-lm",
                    QUIET,
                    "-c",
                    "sqlite3.c",
                    "-o",
                    "speedtest1.kiln-unit-1.o"
                ]),
            ]
        );
        assert_eq!(
            split.link,
            args(&[
                "-O2",
                "-o",
                "speedtest1",
                "speedtest1.kiln-unit-0.o",
                "speedtest1.kiln-unit-1.o",
                "-lm",
                QUIET
            ])
        );
    }

    #[test]
    fn compiles_that_do_not_link_or_whose_options_depend_on_place_stay_whole() {
        for whole in [
            &["-c", "a.c", "-o", "a.o"][..],
            &["a.o", "b.o", "-o", "prog"],
            &["-x", "c", "a.txt", "-o", "prog"],
            &["-MD", "a.c", "-o", "prog"],
            &["-flto", "a.c", "b.c", "-o", "prog"],
            &["-oprog", "a.c"],
        ] {
            assert_eq!(of(&args(whole)), None, "{whole:?}");
        }
        assert_eq!(
            of(&args(&["a.c"])).expect("split").link,
            args(&["a.out.kiln-unit-0.o", QUIET])
        );
    }
}
