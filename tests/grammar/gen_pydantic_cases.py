#!/usr/bin/env python3
"""Writes pydantic_cases.json: the JSON Schema Pydantic 2 emits for a model with numeric and
string constraints (ge/le, gt/lt, min_length/max_length, pattern, date-time, uuid, nested
model via $defs, Optional, Literal, bounded list), and documents with Pydantic's own verdict
on each (model_validate_json). json_schema_test.cpp checks the grammar agrees on them.
  python3 tests/grammar/gen_pydantic_cases.py > tests/grammar/pydantic_cases.json
"""
import json
from datetime import datetime
from typing import Literal, Optional
from uuid import UUID

import pydantic
from pydantic import BaseModel, Field, ValidationError


class Address(BaseModel):
    city: str = Field(min_length=1, max_length=30)
    zip: str = Field(pattern=r"^\d{5}$")


class Person(BaseModel):
    name: str = Field(min_length=1, max_length=40)
    age: int = Field(ge=0, le=150)
    score: float = Field(gt=0, lt=1)
    tags: list[str] = Field(min_length=1, max_length=3)
    created: datetime
    id: UUID
    address: Address
    kind: Literal["a", "b"]
    nickname: Optional[str] = None


valid = {"name": "Ann", "age": 30, "score": 0.5, "tags": ["x"], "created": "2024-05-01T12:30:00Z",
         "id": "123e4567-e89b-12d3-a456-426614174000", "address": {"city": "Paris", "zip": "75001"},
         "kind": "a", "nickname": None}


def variant(**changes):
    doc = dict(valid)
    doc.update(changes)
    return doc


docs = [valid, variant(nickname="Annie"), variant(age=150, score=0.999, tags=["a", "b", "c"]),
        variant(age=151), variant(age=-1), variant(age=2.5), variant(score=0), variant(score=1),
        variant(score=1.5), variant(name=""), variant(tags=[]), variant(tags=["a", "b", "c", "d"]),
        variant(address={"city": "Paris", "zip": "7500"}), variant(address={"city": "", "zip": "75001"}),
        variant(kind="c"), variant(id="not-a-uuid")]
docs_out = []
for d in docs:
    text = json.dumps(d, ensure_ascii=False)
    try:
        Person.model_validate_json(text)
        ok = True
    except ValidationError:
        ok = False
    docs_out.append({"text": text, "valid": ok})
d = docs[0]
print(json.dumps({"comment": f"pydantic {pydantic.VERSION}: Person.model_json_schema(); verdicts from model_validate_json",
                  "schema": Person.model_json_schema(), "docs": docs_out}, indent=1))
