"""The reference's knowledge-base schemas, as kb tools use them."""
from __future__ import annotations

from typing import List, Optional

from pydantic import BaseModel, Field

__all__ = ["KBChunkContextResponse", "KBDocumentListItem", "KBFullTextResponse", "KBReferencedSource",
           "KBSearchDocument", "KBSearchItem", "KBSearchResponse", "KBSearchSnippet", "KBSourceFileResponse"]


class KBReferencedSource(BaseModel):
    source_kind: str
    document_id: int


class KBDocumentListItem(BaseModel):
    id: int
    workspace_id: int
    title: str
    category: str = ""
    tags: List[str] = Field(default_factory=list)
    summary: str = ""
    file_name: str
    file_ext: str
    mime_type: str
    format: str
    source_path: str
    source_workspace_path: str = ""
    normalized_text_path: Optional[str] = None
    normalized_workspace_path: Optional[str] = None
    is_enabled: bool = True
    extract_status: str
    sync_status: str
    chunk_count: int
    file_size: int
    last_error: Optional[str] = None
    last_indexed_at: Optional[str] = None
    update_time: str
    create_time: str


class KBFullTextResponse(BaseModel):
    document_id: int
    title: str
    source_path: str
    source_workspace_path: Optional[str] = None
    normalized_text_path: Optional[str] = None
    normalized_workspace_path: Optional[str] = None
    content: str
    truncated: bool = False


class KBChunkContextResponse(BaseModel):
    document_id: int
    chunk_id: int
    title: str
    source_path: str
    source_workspace_path: Optional[str] = None
    normalized_text_path: Optional[str] = None
    normalized_workspace_path: Optional[str] = None
    heading_path: str = ""
    chunk_char_start: int
    chunk_char_end: int
    window_start: int
    window_size: int
    excerpt_char_start: int
    excerpt_char_end: int
    before_truncated: bool = False
    after_truncated: bool = False
    includes_hit: bool = True
    prev_window_start: Optional[int] = None
    next_window_start: Optional[int] = None
    match_text: str
    annotated_excerpt: str


class KBSearchItem(BaseModel):
    document_id: int
    source_kind: str = "document"
    chunk_id: int
    title: str
    file_name: str
    format: str
    source_path: str
    source_workspace_path: str = ""
    normalized_text_path: Optional[str] = None
    normalized_workspace_path: Optional[str] = None
    heading_path: str = ""
    category: str = ""
    tags: List[str] = Field(default_factory=list)
    content_preview: str
    score: float


class KBSearchSnippet(BaseModel):
    chunk_id: int
    heading_path: str = ""
    content_preview: str
    score: float


class KBSearchDocument(BaseModel):
    document_id: int
    source_kind: str = "document"
    title: str
    file_name: str
    format: str
    source_path: str
    source_workspace_path: str = ""
    normalized_text_path: Optional[str] = None
    normalized_workspace_path: Optional[str] = None
    category: str = ""
    tags: List[str] = Field(default_factory=list)
    document_score: float
    matched_chunk_count: int
    headings: List[str] = Field(default_factory=list)
    best_match_excerpt: str = ""
    snippets: List[KBSearchSnippet] = Field(default_factory=list)
    referenced_sources: List[KBReferencedSource] = Field(default_factory=list)


class KBSearchResponse(BaseModel):
    workspace_id: int
    query: str
    total: int
    items: List[KBSearchItem] = Field(default_factory=list)
    document_total: int = 0
    documents: List[KBSearchDocument] = Field(default_factory=list)
    suggested_document_ids: List[int] = Field(default_factory=list)
    next_action_hint: str = ""
    reference_expanded_items: List[KBSearchItem] = Field(default_factory=list)


class KBSourceFileResponse(BaseModel):
    document_id: int
    title: str
    source_path: str
    source_workspace_path: Optional[str] = None
    sandbox_file_path: Optional[str] = None
