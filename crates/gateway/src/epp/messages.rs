//! Envoy's `ext_proc` messages as the endpoint-picker protocol (Gateway API Inference
//! Extension, proposal 004) uses them: the chosen endpoint in a request header and in the
//! `envoy.lb` dynamic metadata, bodies passed back as streamed mutations, refusals as immediate
//! responses, and the proxy's subset hint and served endpoint read from its metadata. Only
//! building and reading messages: no decision is made here.

use envoy_types::pb::envoy::config::core::v3::{
    HeaderValue, HeaderValueOption, Metadata, header_value_option::HeaderAppendAction,
};
use envoy_types::pb::envoy::service::ext_proc::v3::{
    BodyMutation, BodyResponse, CommonResponse, HeaderMutation, HeadersResponse, HttpHeaders,
    ImmediateResponse, ProcessingResponse, StreamedBodyResponse, TrailersResponse,
    body_mutation::Mutation, processing_response::Response,
};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use hyper::HeaderMap;
use hyper::header::{HeaderName, HeaderValue as HttpValue};

/// The header (and `envoy.lb` metadata key) naming the chosen endpoint, then its fallbacks.
pub const DESTINATION: &str = "x-gateway-destination-endpoint";
/// The metadata namespace Envoy's load balancer reads the destination from.
pub const LB_NAMESPACE: &str = "envoy.lb";
/// Where the proxy puts the subset of endpoints a request may go to.
pub const SUBSET_NAMESPACE: &str = "envoy.lb.subset_hint";
/// The subset's key.
pub const SUBSET_KEY: &str = "x-gateway-destination-endpoint-subset";
/// The key (in `envoy.lb`) under which the proxy reports the endpoint that served.
pub const SERVED_KEY: &str = "x-gateway-destination-endpoint-served";
/// The header of an immediate response that says why the request was not placed.
pub const REASON: &str = "x-xsched-reason";
/// The largest body chunk sent back (the reference picker's bound, under Envoy's 64 KiB).
pub const CHUNK: usize = 62_000;

/// `h`'s regular headers (values from `raw_value`, else `value`); pseudo-headers and names or
/// values HTTP does not allow are left out.
pub fn header_map(h: &HttpHeaders) -> HeaderMap {
    let mut map = HeaderMap::new();
    for v in h.headers.iter().flat_map(|m| &m.headers) {
        let name = HeaderName::from_bytes(v.key.as_bytes());
        let value = HttpValue::from_bytes(raw(v));
        if let (Ok(name), Ok(value)) = (name, value) {
            map.append(name, value);
        }
    }
    map
}

/// The value of `name` (a pseudo-header such as `:path` or `:status` too) in `h`.
pub fn header(h: &HttpHeaders, name: &str) -> Option<String> {
    let v = h
        .headers
        .iter()
        .flat_map(|m| &m.headers)
        .find(|v| v.key == name)?;
    String::from_utf8(raw(v).to_vec()).ok()
}

fn raw(v: &HeaderValue) -> &[u8] {
    if v.raw_value.is_empty() {
        v.value.as_bytes()
    } else {
        &v.raw_value
    }
}

/// The answer to a request's headers once its endpoint is chosen: `endpoints` (the chosen one
/// first, `host:port`, comma-separated) in the header and in `envoy.lb`, the route re-chosen.
pub fn picked(endpoints: &str) -> ProcessingResponse {
    let common = CommonResponse {
        header_mutation: Some(HeaderMutation {
            set_headers: vec![set(DESTINATION, endpoints)],
            remove_headers: Vec::new(),
        }),
        clear_route_cache: true,
        ..CommonResponse::default()
    };
    let lb = Struct {
        fields: [(DESTINATION.to_string(), string(endpoints))].into(),
    };
    ProcessingResponse {
        response: Some(Response::RequestHeaders(HeadersResponse {
            response: Some(common),
        })),
        dynamic_metadata: Some(Struct {
            fields: [(LB_NAMESPACE.to_string(), structure(lb))].into(),
        }),
        ..ProcessingResponse::default()
    }
}

/// Headers passed on unchanged (a response's, or a request's that carries no decision).
pub fn headers_unchanged(request: bool) -> ProcessingResponse {
    let r = HeadersResponse { response: None };
    respond(if request {
        Response::RequestHeaders(r)
    } else {
        Response::ResponseHeaders(r)
    })
}

/// `body` passed back as streamed chunks of at most [`CHUNK`] bytes, the last with
/// `end_of_stream` when `end` (an empty body is one empty chunk).
pub fn body_chunks(body: &[u8], end: bool, request: bool) -> Vec<ProcessingResponse> {
    let chunks: Vec<&[u8]> = if body.is_empty() {
        vec![&[]]
    } else {
        body.chunks(CHUNK).collect()
    };
    let last = chunks.len() - 1;
    (chunks.into_iter().enumerate())
        .map(|(i, chunk)| {
            let mutation = BodyMutation {
                mutation: Some(Mutation::StreamedResponse(StreamedBodyResponse {
                    body: chunk.to_vec(),
                    end_of_stream: end && i == last,
                    ..StreamedBodyResponse::default()
                })),
            };
            let r = BodyResponse {
                response: Some(CommonResponse {
                    body_mutation: Some(mutation),
                    ..CommonResponse::default()
                }),
            };
            respond(if request {
                Response::RequestBody(r)
            } else {
                Response::ResponseBody(r)
            })
        })
        .collect()
}

/// Trailers passed on unchanged.
pub fn trailers(request: bool) -> ProcessingResponse {
    let r = TrailersResponse::default();
    respond(if request {
        Response::RequestTrailers(r)
    } else {
        Response::ResponseTrailers(r)
    })
}

/// The proxy answers the client itself with `status`, `reason` in [`REASON`] and `body`.
pub fn immediate(
    status: u16,
    reason: &str,
    shed: Option<&str>,
    body: Vec<u8>,
) -> ProcessingResponse {
    // A header value cannot hold a line break; the body has the whole message.
    let reason: String = reason.chars().filter(|c| !c.is_control()).collect();
    let mut set_headers = vec![
        set(REASON, &reason),
        set("content-type", "application/json"),
    ];
    set_headers.extend(shed.map(|s| set(crate::error::SHED_REASON, s)));
    respond(Response::ImmediateResponse(ImmediateResponse {
        status: Some(HttpStatus {
            code: i32::from(status),
        }),
        headers: Some(HeaderMutation {
            set_headers,
            remove_headers: Vec::new(),
        }),
        body,
        details: "xsched_epp".into(),
        ..ImmediateResponse::default()
    }))
}

/// The subset of endpoints the proxy allows, when it sent one: a list of strings, or one
/// comma-separated string (as header-to-metadata rules write it).
pub fn subset(md: Option<&Metadata>) -> Option<Vec<String>> {
    let value = md?
        .filter_metadata
        .get(SUBSET_NAMESPACE)?
        .fields
        .get(SUBSET_KEY)?;
    let strings = match &value.kind {
        Some(Kind::ListValue(list)) => (list.values.iter())
            .filter_map(|v| match &v.kind {
                Some(Kind::StringValue(s)) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        Some(Kind::StringValue(s)) => s.split(',').map(|e| e.trim().to_string()).collect(),
        _ => Vec::new(),
    };
    Some(strings.into_iter().filter(|s| !s.is_empty()).collect())
}

/// The endpoint the proxy reports as the one that served, when it does.
pub fn served(md: Option<&Metadata>) -> Option<String> {
    match &md?
        .filter_metadata
        .get(LB_NAMESPACE)?
        .fields
        .get(SERVED_KEY)?
        .kind
    {
        Some(Kind::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// Whether `endpoint` (`host:port`) is in `subset` (entries `host:port`, or `host` alone for
/// any port).
pub fn in_subset(endpoint: &str, subset: &[String]) -> bool {
    let host = endpoint.rsplit_once(':').map_or(endpoint, |(h, _)| h);
    subset.iter().any(|s| s == endpoint || s == host)
}

/// Headers as a proxy sends them (`pairs`, pseudo-headers such as `:path` included): what the
/// tests and the cost benchmark drive the picker with.
pub fn http_headers(pairs: &[(&str, &str)], end_of_stream: bool) -> HttpHeaders {
    HttpHeaders {
        headers: Some(envoy_types::pb::envoy::config::core::v3::HeaderMap {
            headers: (pairs.iter())
                .map(|(k, v)| HeaderValue {
                    key: k.to_string(),
                    raw_value: v.as_bytes().to_vec(),
                    ..HeaderValue::default()
                })
                .collect(),
        }),
        end_of_stream,
        ..HttpHeaders::default()
    }
}

/// Set header `key` to `value`, replacing any.
fn set(key: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: key.into(),
            raw_value: value.as_bytes().to_vec(),
            ..HeaderValue::default()
        }),
        append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..HeaderValueOption::default()
    }
}

fn respond(response: Response) -> ProcessingResponse {
    ProcessingResponse {
        response: Some(response),
        ..ProcessingResponse::default()
    }
}

fn string(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.to_string())),
    }
}

fn structure(s: Struct) -> Value {
    Value {
        kind: Some(Kind::StructValue(s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::core::v3::HeaderMap as EnvoyHeaders;
    use envoy_types::pb::google::protobuf::ListValue;

    fn metadata(namespace: &str, key: &str, value: Value) -> Metadata {
        Metadata {
            filter_metadata: [(
                namespace.to_string(),
                Struct {
                    fields: [(key.to_string(), value)].into(),
                },
            )]
            .into(),
            ..Metadata::default()
        }
    }

    #[test]
    fn the_pick_is_in_the_header_and_in_the_lb_metadata_alike() {
        let r = picked("10.0.0.2:8000,10.0.0.1:8000");
        let Some(Response::RequestHeaders(h)) = &r.response else {
            panic!("a request-headers answer: {r:?}");
        };
        let common = h.response.as_ref().expect("common");
        assert!(common.clear_route_cache);
        let set = &common
            .header_mutation
            .as_ref()
            .expect("mutation")
            .set_headers[0];
        let header = set.header.as_ref().expect("header");
        assert_eq!(header.key, DESTINATION);
        assert_eq!(header.raw_value, b"10.0.0.2:8000,10.0.0.1:8000");
        let lb = &r.dynamic_metadata.as_ref().expect("metadata").fields[LB_NAMESPACE];
        let Some(Kind::StructValue(lb)) = &lb.kind else {
            panic!("a struct: {lb:?}");
        };
        assert_eq!(
            lb.fields[DESTINATION].kind,
            Some(Kind::StringValue("10.0.0.2:8000,10.0.0.1:8000".into()))
        );
    }

    #[test]
    fn bodies_go_back_in_bounded_chunks_with_one_end() {
        let body = vec![7u8; 2 * CHUNK + 5];
        let chunks = body_chunks(&body, true, true);
        assert_eq!(chunks.len(), 3);
        let mut back = Vec::new();
        let mut ends = 0;
        for c in &chunks {
            let Some(Response::RequestBody(b)) = &c.response else {
                panic!("a request-body answer");
            };
            let m = b.response.as_ref().and_then(|c| c.body_mutation.as_ref());
            let Some(Mutation::StreamedResponse(s)) = m.and_then(|m| m.mutation.as_ref()) else {
                panic!("a streamed mutation");
            };
            assert!(s.body.len() <= CHUNK);
            back.extend_from_slice(&s.body);
            ends += usize::from(s.end_of_stream);
        }
        assert_eq!((back, ends), (body, 1));
        assert_eq!(
            body_chunks(&[], true, false).len(),
            1,
            "an empty body is one chunk"
        );
    }

    #[test]
    fn headers_are_read_from_raw_values_and_pseudo_headers_apart() {
        let h = HttpHeaders {
            headers: Some(EnvoyHeaders {
                headers: vec![
                    HeaderValue {
                        key: ":path".into(),
                        raw_value: b"/v1/chat/completions".to_vec(),
                        ..HeaderValue::default()
                    },
                    HeaderValue {
                        key: "x-llm-d-inference-objective".into(),
                        value: "critical".into(),
                        ..HeaderValue::default()
                    },
                ],
            }),
            ..HttpHeaders::default()
        };
        assert_eq!(header(&h, ":path").as_deref(), Some("/v1/chat/completions"));
        let map = header_map(&h);
        assert_eq!(map.len(), 1, "the pseudo-header is not a header");
        assert_eq!(map["x-llm-d-inference-objective"], "critical");
    }

    #[test]
    fn a_subset_is_a_list_or_a_comma_separated_string_and_matches_by_host_or_endpoint() {
        let list = Value {
            kind: Some(Kind::ListValue(ListValue {
                values: vec![string("10.0.0.1:8000"), string("10.0.0.3")],
            })),
        };
        let md = metadata(SUBSET_NAMESPACE, SUBSET_KEY, list);
        let s = subset(Some(&md)).expect("a subset");
        assert!(in_subset("10.0.0.1:8000", &s));
        assert!(
            in_subset("10.0.0.3:9000", &s),
            "a host alone allows any port"
        );
        assert!(!in_subset("10.0.0.1:8001", &s));
        let flat = metadata(SUBSET_NAMESPACE, SUBSET_KEY, string("a:1, b:2"));
        assert_eq!(subset(Some(&flat)), Some(vec!["a:1".into(), "b:2".into()]));
        assert_eq!(subset(None), None, "no hint: the whole pool");
        let served_md = metadata(LB_NAMESPACE, SERVED_KEY, string("10.0.0.1:8000"));
        assert_eq!(served(Some(&served_md)).as_deref(), Some("10.0.0.1:8000"));
    }

    #[test]
    fn an_immediate_response_carries_its_status_and_a_one_line_reason() {
        let r = immediate(429, "full\nqueue", Some("queue-full"), b"{}".to_vec());
        let Some(Response::ImmediateResponse(i)) = &r.response else {
            panic!("immediate");
        };
        assert_eq!(i.status.as_ref().map(|s| s.code), Some(429));
        let headers = &i.headers.as_ref().expect("headers").set_headers;
        let reason = headers[0].header.as_ref().expect("reason");
        assert_eq!(
            (reason.key.as_str(), &reason.raw_value[..]),
            (REASON, &b"fullqueue"[..])
        );
    }
}
