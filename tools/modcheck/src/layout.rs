//! The repository's layout: results/ holds results only (no script), and the
//! shell scripts under scripts/ hold shell only (no heredoc carrying another
//! language's text: configs and programs live in files of their own).

use std::path::Path;

/// Each breach of the layout under `root`, as `path: what` (paths relative to `root`).
pub fn problems(root: &Path) -> std::io::Result<Vec<String>> {
    let mut found = Vec::new();
    for (path, text) in files(root, "results")? {
        if is_script(&path, &text) {
            found.push(format!(
                "{path}: a script under results/ (scripts live under scripts/)"
            ));
        }
    }
    for (path, text) in files(root, "scripts")? {
        if !is_shell(&path, &text) {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if opens_heredoc(line) {
                found.push(format!(
                    "{path}:{}: a heredoc in a shell script (its text belongs in a file of its own)",
                    n + 1
                ));
            }
        }
    }
    Ok(found)
}

fn is_script(path: &str, text: &str) -> bool {
    let ext = path.rsplit_once('.').map(|(_, e)| e);
    matches!(ext, Some("sh" | "bash" | "py" | "pl")) || text.starts_with("#!")
}

fn is_shell(path: &str, text: &str) -> bool {
    let first = text.lines().next().unwrap_or("");
    path.ends_with(".sh") || (first.starts_with("#!") && first.ends_with("sh"))
}

/// `<<WORD`, `<<-WORD`, `<<'WORD'` or `<<"WORD"`, not a here-string (`<<<`).
fn opens_heredoc(line: &str) -> bool {
    let code = line.trim_start();
    if code.starts_with('#') {
        return false;
    }
    code.match_indices("<<").any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + 2..].trim_start_matches('-');
        let after = after.trim_start_matches(['\'', '"']);
        before != Some('<')
            && after
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
    })
}

/// Every file under `root/dir`, as (path relative to `root`, text).
fn files(root: &Path, dir: &str) -> std::io::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    crate::read_tree(root, &root.join(dir), &|_| true, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heredocs_are_told_from_here_strings_and_shifts() {
        assert!(opens_heredoc("    cat <<EOF"));
        assert!(opens_heredoc("cat >\"$d/conf\" <<'EOF'"));
        assert!(opens_heredoc("python3 - <<-PY"));
        assert!(!opens_heredoc("read -r a b <<<\"$line\""));
        assert!(!opens_heredoc("echo $((1 << 3))"));
        assert!(!opens_heredoc("# cat <<EOF in a comment"));
    }

    #[test]
    fn a_script_is_told_by_its_name_or_its_first_line() {
        assert!(is_script("results/gpu/check.sh", ""));
        assert!(is_script("results/x", "#!/usr/bin/env python3\n"));
        assert!(!is_script("results/search.md", "# Search\n"));
        assert!(is_shell("scripts/test", "#!/usr/bin/env bash\n"));
        assert!(!is_shell("scripts/lib/x.py", "#!/usr/bin/env python3\n"));
    }
}
