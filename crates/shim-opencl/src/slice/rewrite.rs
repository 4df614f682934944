//! The twin program's source: the application's OpenCL C with a prelude that makes the builtins
//! describing the launch (`get_group_id`, `get_num_groups`, `get_global_size`,
//! `get_global_offset`) answer for the whole launch while a slice of it runs, the slice placed by
//! its `global_work_offset` (docs/KERNEL-SLICING.md). The application's own program is never
//! changed; a source this cannot make exact gets a [`Refusal`] saying why, and its kernels are
//! never sliced.

/// The twin's source, and whether its kernels take the whole launch's global size as three
/// extra `ulong` arguments after the application's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Twin {
    /// The rewritten source.
    pub(crate) source: String,
    /// Every `__kernel` takes `ulong` global sizes of dimensions 0, 1, 2 after its own arguments.
    pub(crate) takes_sizes: bool,
    /// No work-item depends on its work-group (no group or local id or size, no barrier, no local
    /// memory, no work-group or sub-group function): a launch may be cut at any work-item, even
    /// one with a NULL local size.
    pub(crate) items_independent: bool,
}

/// Why a source gets no twin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It uses a builtin the prelude cannot make exact for a slice.
    Builtin(&'static str),
    /// A `__kernel`'s parameter list could not be found (unbalanced parentheses).
    Unparsed,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Builtin(b) => write!(f, "it uses `{b}`, which a slice cannot see whole"),
            Refusal::Unparsed => write!(f, "a __kernel's parameter list could not be read"),
        }
    }
}

/// Builtins whose value in a slice cannot be made the whole launch's by the prelude.
const REFUSED: [&str; 5] = [
    "get_global_linear_id",
    "enqueue_kernel",
    "get_enqueued_num_sub_groups",
    "read_pipe",
    "write_pipe",
];

/// What ties a work-item to its work-group (exact names, then prefixes).
const GROUP_BOUND: [&str; 9] = [
    "get_group_id",
    "get_local_id",
    "get_local_size",
    "get_num_groups",
    "get_enqueued_local_size",
    "barrier",
    "mem_fence",
    "local",
    "__local",
];
const GROUP_BOUND_PREFIXES: [&str; 3] = ["work_group_", "sub_group_", "get_sub_group"];

/// Names of the extra arguments.
const SIZES: [&str; 3] = ["__xs_gsz0", "__xs_gsz1", "__xs_gsz2"];

const PRELUDE: &str = "\
size_t __xs_offset(uint d) { return get_global_offset(d); }
#define get_group_id(d) (get_group_id(d) + __xs_offset(d) / get_local_size(d))
#define get_global_offset(d) ((size_t)0)
";

const PRELUDE_SIZES: &str = "\
#define get_global_size(d) ((size_t)((d) == 0 ? __xs_gsz0 : (d) == 1 ? __xs_gsz1 : (d) == 2 ? __xs_gsz2 : 1))
#define get_num_groups(d) (get_global_size(d) / get_local_size(d))
";

/// The twin of `source`, or why there is none.
pub(crate) fn twin(source: &str) -> Result<Twin, Refusal> {
    let tokens = tokens(source);
    if let Some(b) = REFUSED
        .iter()
        .find(|b| tokens.iter().any(|t| t.text == **b))
    {
        return Err(Refusal::Builtin(b));
    }
    let takes_sizes = tokens
        .iter()
        .any(|t| t.text == "get_num_groups" || t.text == "get_global_size");
    let items_independent = !tokens.iter().any(|t| {
        GROUP_BOUND.contains(&t.text) || GROUP_BOUND_PREFIXES.iter().any(|p| t.text.starts_with(p))
    });
    let body = if takes_sizes {
        with_size_arguments(source, &tokens)?
    } else {
        source.to_string()
    };
    let mut out = String::from(PRELUDE);
    if takes_sizes {
        out.push_str(PRELUDE_SIZES);
    }
    // Build errors and warnings keep the application's line numbers.
    out.push_str("#line 1\n");
    out.push_str(&body);
    Ok(Twin {
        source: out,
        takes_sizes,
        items_independent,
    })
}

/// An identifier or one punctuation character, outside comments, strings and character
/// literals, with its byte position.
#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    text: &'a str,
    at: usize,
}

/// The source's identifiers and punctuation, comments and literals skipped.
fn tokens(src: &str) -> Vec<Token<'_>> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if b[i..].starts_with(b"//") {
            i = src[i..].find('\n').map_or(b.len(), |n| i + n);
        } else if b[i..].starts_with(b"/*") {
            i = src[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
        } else if c == b'"' || c == b'\'' {
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token {
                text: &src[start..i],
                at: start,
            });
        } else if c.is_ascii_punctuation() {
            out.push(Token {
                text: &src[i..i + 1],
                at: i,
            });
            i += 1;
        } else {
            i += 1;
        }
    }
    out
}

/// `src` with the three size arguments appended to every `__kernel`'s parameter list.
fn with_size_arguments(src: &str, tokens: &[Token<'_>]) -> Result<String, Refusal> {
    let mut inserts = Vec::new();
    for (k, t) in tokens.iter().enumerate() {
        if t.text == "__kernel" || t.text == "kernel" {
            inserts.push(parameter_list(tokens, k)?);
        }
    }
    let extra: Vec<String> = SIZES.iter().map(|s| format!("ulong {s}")).collect();
    let mut out = String::with_capacity(src.len() + 64 * inserts.len());
    let mut from = 0;
    for (open, close) in inserts {
        let params = src[open + 1..close].trim();
        out.push_str(&src[from..=open]);
        if params.is_empty() || params == "void" {
            out.push_str(&extra.join(", "));
        } else {
            out.push_str(&src[open + 1..close]);
            out.push_str(", ");
            out.push_str(&extra.join(", "));
        }
        from = close;
    }
    out.push_str(&src[from..]);
    Ok(out)
}

/// The byte positions of the `(` and `)` around the parameters of the kernel whose `__kernel`
/// token is `tokens[k]`: the first `(` after it that follows a name other than `__attribute__`
/// (attributes' own parentheses skipped whole).
fn parameter_list(tokens: &[Token<'_>], k: usize) -> Result<(usize, usize), Refusal> {
    let mut i = k + 1;
    while i < tokens.len() {
        let t = tokens[i];
        if t.text == "__attribute__" || t.text == "attribute" {
            i = matching(tokens, i + 1).ok_or(Refusal::Unparsed)? + 1;
            continue;
        }
        if t.text == "(" {
            let close = matching(tokens, i).ok_or(Refusal::Unparsed)?;
            return Ok((t.at, tokens[close].at));
        }
        i += 1;
    }
    Err(Refusal::Unparsed)
}

/// The index of the `)` matching the `(` at `tokens[open]`.
fn matching(tokens: &[Token<'_>], open: usize) -> Option<usize> {
    if tokens.get(open)?.text != "(" {
        return None;
    }
    let mut depth = 0usize;
    for (i, t) in tokens.iter().enumerate().skip(open) {
        match t.text {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINYGRAD_LIKE: &str = "\
__kernel __attribute__((reqd_work_group_size(16, 1, 1)))
void r_4_16(__global float* data0, const __global float* data1) {
  int gidx0 = get_group_id(0); /* get_num_groups in a comment */
  int lidx0 = get_local_id(0);
  data0[gidx0 * 16 + lidx0] = data1[gidx0];
}
";

    #[test]
    fn group_ids_alone_need_only_the_prelude() {
        let t = twin(TINYGRAD_LIKE).expect("twin");
        assert!(!t.takes_sizes, "a comment does not count");
        assert!(!t.items_independent, "it reads its group id");
        assert!(t.source.starts_with(PRELUDE));
        assert!(t.source.contains("#line 1\n__kernel __attribute__"));
        assert!(
            t.source
                .contains("void r_4_16(__global float* data0, const __global float* data1) {")
        );
    }

    #[test]
    fn sizes_used_add_three_arguments_to_every_kernel() {
        let src = "kernel void a(void) { size_t n = get_global_size(0); }\n\
                   __kernel void b(__global int *x) { x[0] = get_num_groups(1); }\n\
                   void helper(int k) {}\n";
        let t = twin(src).expect("twin");
        assert!(t.takes_sizes);
        assert!(
            t.source
                .contains("kernel void a(ulong __xs_gsz0, ulong __xs_gsz1, ulong __xs_gsz2)")
        );
        assert!(t.source.contains(
            "__kernel void b(__global int *x, ulong __xs_gsz0, ulong __xs_gsz1, ulong __xs_gsz2)"
        ));
        assert!(t.source.contains("void helper(int k)"), "not a kernel");
        assert!(t.source.contains(PRELUDE_SIZES));
    }

    #[test]
    fn a_kernel_of_global_ids_alone_may_be_cut_at_any_work_item() {
        let src = "__kernel void vec(__global float *a, uint n) { a[get_global_id(0)] *= 2; }";
        assert!(twin(src).expect("twin").items_independent);
        let with_local = "__kernel void v(__local float *t) { t[get_global_id(0)] = 0; }";
        assert!(!twin(with_local).expect("twin").items_independent);
        let reduce = "__kernel void r(__global int *x) { x[0] = work_group_reduce_add(1); }";
        assert!(!twin(reduce).expect("twin").items_independent);
    }

    #[test]
    fn builtins_a_slice_cannot_see_whole_are_refused_by_name() {
        let src = "kernel void a(global int *x) { x[get_global_linear_id()] = 1; }";
        let why = twin(src).expect_err("refused");
        assert_eq!(why, Refusal::Builtin("get_global_linear_id"));
        assert!(why.to_string().contains("get_global_linear_id"));
        let in_string = "kernel void a(global int *x) { printf(\"get_global_linear_id\"); }";
        assert!(twin(in_string).is_ok(), "a string is not a use");
    }

    #[test]
    fn an_unbalanced_kernel_is_refused() {
        let src = "kernel void a(global int *x { get_num_groups(0); }";
        assert_eq!(twin(src), Err(Refusal::Unparsed));
    }
}
