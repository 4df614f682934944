//! `docs/reference/cli.md`, every command and flag, written from the same clap definitions the
//! binary parses with, so the reference cannot drift from the program: a test renders it and
//! compares it with the file (`XSCHED_BLESS=1` writes it instead).

use clap::Command;
use std::fmt::Write as _;

/// The reference page for `cmd` and every subcommand under it.
pub fn render(cmd: &mut Command) -> String {
    cmd.build();
    let mut out = String::from(
        "# Command reference\n\n\
         Every `xsched` command with its flags, as `xsched … --help` prints them. Generated from \
         the CLI's own definitions: `XSCHED_BLESS=1 cargo nextest run -p xsched-cli reference` \
         rewrites this page, and the test command fails when it is out of date.\n\n## Contents\n\n",
    );
    let mut pages = Vec::new();
    walk(cmd, &mut Vec::new(), &mut pages);
    for (path, _) in &pages {
        let depth = path.len().saturating_sub(1);
        let title = path.join(" ");
        let _ = writeln!(
            out,
            "{}- [`{title}`](#{})",
            "  ".repeat(depth),
            slug(&title)
        );
    }
    for (path, help) in &pages {
        let _ = write!(
            out,
            "\n## `{}`\n\n```text\n{}\n```\n",
            path.join(" "),
            help.trim_end()
        );
    }
    out
}

/// Each command's path (`xsched llm serve`) and its long help, depth first.
fn walk(cmd: &mut Command, path: &mut Vec<String>, pages: &mut Vec<(Vec<String>, String)>) {
    path.push(cmd.get_name().to_string());
    let help = cmd.render_long_help().to_string();
    pages.push((path.clone(), help));
    for sub in cmd.get_subcommands_mut() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        walk(sub, path, pages);
    }
    path.pop();
}

/// GitHub's anchor for a heading of inline code `title`.
fn slug(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_reference_is_current() {
        let page = render(&mut crate::Cli::command());
        let file =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference/cli.md");
        if std::env::var_os("XSCHED_BLESS").is_some() {
            std::fs::write(&file, &page).expect("write the reference");
            return;
        }
        let on_disk = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            on_disk == page,
            "docs/reference/cli.md is out of date: run \
             `XSCHED_BLESS=1 cargo nextest run -p xsched-cli reference` and commit it"
        );
        assert!(
            page.contains("## `xsched llm serve`"),
            "the gateway's flags are in it"
        );
    }
}
