//! What the page shows, as serializable records: the file and trace overview, one op in full,
//! the graph to draw and the answer to a search.

mod graph;
mod op_detail;
mod overview;
mod search;

pub use graph::{graph_view, GraphEdge, GraphNode, GraphView};
pub use op_detail::{op_detail, OpDetail, OpRef, PayloadView};
pub use overview::{overview, CaptureView, Counts, Overview};
pub use search::{search, SearchResult, MAX_LISTED_MATCHES};
