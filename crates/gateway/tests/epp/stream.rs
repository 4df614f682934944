//! Envoy's side of a picker's stream, without Envoy: a request's messages sent as Envoy sends
//! them, and the picker's answers read back (the endpoint it names, the body passed back, a
//! refusal's status and reason).

use crate::support::chat;
use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_client::ExternalProcessorClient;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HttpBody, ProcessingRequest, ProcessingResponse, body_mutation::Mutation,
    processing_request::Request, processing_response::Response,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use xsched_gateway::epp::messages::{
    DESTINATION, REASON, SUBSET_KEY, SUBSET_NAMESPACE, http_headers,
};

/// One request's stream, as Envoy holds it.
pub(crate) struct Stream {
    tx: mpsc::Sender<ProcessingRequest>,
    rx: tonic::Streaming<ProcessingResponse>,
}

impl Stream {
    pub(crate) async fn open(addr: SocketAddr) -> Stream {
        let mut client = ExternalProcessorClient::connect(format!("http://{addr}"))
            .await
            .expect("connect");
        let (tx, out) = mpsc::channel(16);
        let rx = client
            .process(ReceiverStream::new(out))
            .await
            .expect("a stream")
            .into_inner();
        Stream { tx, rx }
    }

    pub(crate) async fn send(&self, request: Request, metadata: Option<Metadata>) {
        let message = ProcessingRequest {
            request: Some(request),
            metadata_context: metadata,
            ..ProcessingRequest::default()
        };
        self.tx.send(message).await.expect("the picker listens");
    }

    /// A completion's headers then its body in two chunks, the second ending the stream.
    pub(crate) async fn request(
        &self,
        body: &str,
        headers: &[(&str, &str)],
        metadata: Option<Metadata>,
    ) {
        let mut all = vec![(":method", "POST"), (":path", "/v1/chat/completions")];
        all.extend_from_slice(headers);
        self.send(Request::RequestHeaders(http_headers(&all, false)), metadata)
            .await;
        let (a, b) = body.as_bytes().split_at(body.len() / 2);
        self.send(Request::RequestBody(http_body(a, false)), None)
            .await;
        self.send(Request::RequestBody(http_body(b, true)), None)
            .await;
    }

    async fn next(&mut self) -> ProcessingResponse {
        tokio::time::timeout(Duration::from_secs(30), self.rx.message())
            .await
            .expect("an answer within 30 s")
            .expect("no gRPC error")
            .expect("the stream goes on")
    }

    /// A request tagged `tag`, placed: its endpoint named and its body back.
    pub(crate) async fn placed(addr: SocketAddr, tag: &str) -> Stream {
        let mut s = Stream::open(addr).await;
        s.request(&chat(tag, 10, false), &[], None).await;
        s.endpoint().await;
        s.body().await;
        s
    }

    /// The endpoint named in the header, after checking the metadata names the same.
    pub(crate) async fn endpoint(&mut self) -> String {
        let r = self.next().await;
        endpoint_of(&r)
    }

    /// The endpoint placed at, or the core's reason for refusing the request.
    pub(crate) async fn decided(&mut self) -> Result<String, String> {
        let r = self.next().await;
        let Some(Response::ImmediateResponse(i)) = &r.response else {
            return Ok(endpoint_of(&r));
        };
        let headers = &i.headers.as_ref().expect("headers").set_headers;
        let shed = (headers.iter().filter_map(|h| h.header.as_ref()))
            .find(|h| h.key == xsched_gateway::error::SHED_REASON)
            .map(|h| String::from_utf8_lossy(&h.raw_value).to_string());
        Err(shed.expect("the core's reason"))
    }

    /// The body passed back, to its end.
    pub(crate) async fn body(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let r = self.next().await;
            let (Some(Response::RequestBody(b)) | Some(Response::ResponseBody(b))) = &r.response
            else {
                panic!("a body chunk: {r:?}");
            };
            let m = b.response.as_ref().and_then(|c| c.body_mutation.as_ref());
            let Some(Mutation::StreamedResponse(s)) = m.and_then(|m| m.mutation.as_ref()) else {
                panic!("a streamed body: {r:?}");
            };
            body.extend_from_slice(&s.body);
            if s.end_of_stream {
                return body;
            }
        }
    }

    /// The immediate response's status and reason.
    pub(crate) async fn refused(&mut self) -> (i32, String) {
        let r = self.next().await;
        let Some(Response::ImmediateResponse(i)) = &r.response else {
            panic!("an immediate response: {r:?}");
        };
        let headers = &i.headers.as_ref().expect("headers").set_headers;
        let reason = (headers.iter().filter_map(|h| h.header.as_ref()))
            .find(|h| h.key == REASON)
            .map(|h| String::from_utf8_lossy(&h.raw_value).to_string());
        (
            i.status.as_ref().map_or(0, |s| s.code),
            reason.expect("a reason"),
        )
    }

    /// The engine's answer passing back: headers, one body chunk ending it.
    pub(crate) async fn answer(&mut self, text: &str) {
        self.send(
            Request::ResponseHeaders(http_headers(&[(":status", "200")], false)),
            None,
        )
        .await;
        let r = self.next().await;
        assert!(
            matches!(r.response, Some(Response::ResponseHeaders(_))),
            "{r:?}"
        );
        self.send(
            Request::ResponseBody(http_body(text.as_bytes(), true)),
            None,
        )
        .await;
        assert_eq!(self.body().await, text.as_bytes());
    }
}

/// The endpoint a response names in the header, after checking the metadata names the same.
fn endpoint_of(r: &ProcessingResponse) -> String {
    let Some(Response::RequestHeaders(h)) = &r.response else {
        panic!("an endpoint first: {r:?}");
    };
    let set = &h
        .response
        .as_ref()
        .expect("common")
        .header_mutation
        .as_ref()
        .expect("set");
    let header = set.set_headers[0].header.as_ref().expect("header");
    assert_eq!(header.key, DESTINATION);
    let value = String::from_utf8(header.raw_value.clone()).expect("utf-8");
    let lb = &r.dynamic_metadata.as_ref().expect("metadata").fields["envoy.lb"];
    let Some(Kind::StructValue(lb)) = &lb.kind else {
        panic!("envoy.lb: {lb:?}");
    };
    assert_eq!(
        lb.fields[DESTINATION].kind,
        Some(Kind::StringValue(value.clone()))
    );
    value
}

/// The proxy's subset hint: `endpoints`, one comma-separated string.
pub(crate) fn subset_hint(endpoints: &str) -> Metadata {
    let hint = Value {
        kind: Some(Kind::StringValue(endpoints.into())),
    };
    let fields = [(SUBSET_KEY.to_string(), hint)].into();
    Metadata {
        filter_metadata: [(SUBSET_NAMESPACE.to_string(), Struct { fields })].into(),
        ..Metadata::default()
    }
}

pub(crate) fn http_body(bytes: &[u8], end_of_stream: bool) -> HttpBody {
    HttpBody {
        body: bytes.to_vec(),
        end_of_stream,
        ..HttpBody::default()
    }
}
