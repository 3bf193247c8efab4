"""The labelled set that calibrates the memory relevance threshold.

``MEMORIES`` is one user's memories (label -> text). ``PAIRS`` are (query, label, relevant?)
judgements written by hand, in three groups: ``RELEVANT`` (paraphrases that share few or no
words with the memory, questions in Chinese, Japanese and Korean, bare names),
``HARD_NEGATIVES`` (a near topic, but the memory does not answer: a train company is not an
airline, a dentist is not a manager) and ``UNRELATED``. A pair is relevant when the memory
answers the query. ``docs/memory.md`` reports precision and recall at the chosen threshold.
"""

# ruff: noqa: RUF001 - Chinese and Japanese text uses full-width punctuation

from __future__ import annotations

MEMORIES: dict[str, str] = {
    "preferred_airline": "The user prefers to fly KLM",
    "coffee_order": "The user drinks their coffee black, without sugar",
    "daughter_studies": "The user's daughter Emma starts university in Leiden in September",
    "allergies": "The user is allergic to peanuts",
    "favourite_author": "The user's favourite author is Haruki Murakami",
    "current_book": "The user is currently reading The Left Hand of Darkness",
    "job": "The user works as a backend engineer at a logistics company",
    "home_city": "The user lives in Rotterdam",
    "manager": "The user's manager is Priya Raman",
    "sport": "The user runs a half marathon every spring",
    "laptop": "The user's laptop is a ThinkPad X1 Carbon",
    "meeting_times": "The user prefers meetings before 11 am",
    "learning": "The user is learning Japanese",
    "pet": "The user has a border collie called Pixel",
    "diet": "The user is vegetarian",
    "passport_expiry": "The user's passport expires in March 2027",
    "answer_style": "The user wants answers as short bullet points",
    "programming_language": "The user's favourite programming language is Rust",
    "home_office": "The user works at a standing desk at home",
    "wedding_anniversary": "The user's wedding anniversary is on 14 June",
    "drinks": "用户喜欢喝绿茶，不加糖。",
    "morning_routine": "ユーザーは毎朝ジョギングをします。",
    "pets": "사용자는 고양이 두 마리를 키운다.",
    "favourite_food": "The user loves 🍣 sushi and 🍜 ramen",
}

Pair = tuple[str, str, bool]

# The memory answers the query: paraphrases, and questions in the memory's own language.
RELEVANT: list[Pair] = [
    ("which airline do they like?", "preferred_airline", True),
    ("Which carrier should I book their flights with?", "preferred_airline", True),
    ("How does the user take their coffee?", "coffee_order", True),
    ("Does the user want milk or sugar in coffee?", "coffee_order", True),
    ("Where will the user's daughter study?", "daughter_studies", True),
    ("When does Emma start her studies?", "daughter_studies", True),
    ("Does the user have any food allergies?", "allergies", True),
    ("Can I give the user a snack with nuts?", "allergies", True),
    ("Who is their favourite writer?", "favourite_author", True),
    ("Which novelist does the user like most?", "favourite_author", True),
    ("What book are they reading at the moment?", "current_book", True),
    ("What is the user's job?", "job", True),
    ("What does the user do for a living?", "job", True),
    ("Which city does the user live in?", "home_city", True),
    ("Where is the user's home?", "home_city", True),
    ("Who is the user's boss?", "manager", True),
    ("Who does the user report to?", "manager", True),
    ("Does the user do any running?", "sport", True),
    ("Which races does the user train for?", "sport", True),
    ("What computer does the user have?", "laptop", True),
    ("When does the user like to schedule meetings?", "meeting_times", True),
    ("What time of day suits the user for a call?", "meeting_times", True),
    ("What language is the user studying?", "learning", True),
    ("What kind of pet do they have?", "pet", True),
    ("What is the name of the user's dog?", "pet", True),
    ("Does the user eat meat?", "diet", True),
    ("When does their passport run out?", "passport_expiry", True),
    ("How should answers be formatted for this user?", "answer_style", True),
    ("Which programming language do they prefer?", "programming_language", True),
    ("What is their home office setup?", "home_office", True),
    ("When is the user's anniversary?", "wedding_anniversary", True),
    ("What date did the user get married?", "wedding_anniversary", True),
    ("用户喜欢喝什么茶？", "drinks", True),
    ("ユーザーは毎朝何をしますか？", "morning_routine", True),
    ("사용자는 고양이를 키우나요?", "pets", True),
    ("What food does the user love?", "favourite_food", True),
    ("Does the user like sushi?", "favourite_food", True),
    # bare names and rare words: what lexical matching is usually good at
    ("Who is Priya Raman?", "manager", True),
    ("Pixel", "pet", True),
    ("ThinkPad", "laptop", True),
    ("Leiden", "daughter_studies", True),
    ("Murakami", "favourite_author", True),
    ("Rotterdam", "home_city", True),
    ("KLM", "preferred_airline", True),
]

# A near topic, but the memory does not answer.
HARD_NEGATIVES: list[Pair] = [
    ("Pixel", "laptop", False),
    ("Leiden", "home_city", False),
    ("Which train company does the user prefer?", "preferred_airline", False),
    ("Who is the user's dentist?", "manager", False),
    ("What is the name of the user's cat?", "pet", False),
    ("Which spoken languages does the user speak fluently?", "programming_language", False),
    ("What tea does the user drink?", "coffee_order", False),
    ("Where did the user go to university?", "daughter_studies", False),
    ("What phone does the user have?", "laptop", False),
    ("When is the user's birthday?", "wedding_anniversary", False),
    ("Which city was the user born in?", "home_city", False),
    ("Does the user have a gym membership?", "home_office", False),
]

UNRELATED: list[Pair] = [
    ("KLM", "coffee_order", False),
    ("which airline do they like?", "coffee_order", False),
    ("which airline do they like?", "favourite_author", False),
    ("How does the user take their coffee?", "preferred_airline", False),
    ("How does the user take their coffee?", "laptop", False),
    ("Who is their favourite writer?", "sport", False),
    ("Who is their favourite writer?", "passport_expiry", False),
    ("What is the user's job?", "pet", False),
    ("What is the user's job?", "drinks", False),
    ("Which city does the user live in?", "answer_style", False),
    ("Who is the user's boss?", "favourite_food", False),
    ("Does the user do any running?", "favourite_author", False),
    ("What computer does the user have?", "diet", False),
    ("When does their passport run out?", "coffee_order", False),
    ("What kind of pet do they have?", "meeting_times", False),
    ("Does the user eat meat?", "laptop", False),
    ("用户喜欢喝什么茶？", "pets", False),
    ("用户喜欢喝什么茶？", "preferred_airline", False),
    ("ユーザーは毎朝何をしますか？", "drinks", False),
    ("사용자는 고양이를 키우나요?", "morning_routine", False),
    ("quantum chromodynamics", "coffee_order", False),
    ("quantum chromodynamics", "current_book", False),
    ("quantum chromodynamics", "favourite_author", False),
    ("quantum chromodynamics", "learning", False),
    ("What is the capital of Australia?", "home_city", False),
    ("What is the capital of Australia?", "preferred_airline", False),
    ("How do I reset my VPN password?", "laptop", False),
    ("How do I reset my VPN password?", "job", False),
    ("Explain the offside rule in football", "sport", False),
    ("Explain the offside rule in football", "pet", False),
    ("What will the weather be in Tokyo tomorrow?", "learning", False),
    ("What will the weather be in Tokyo tomorrow?", "morning_routine", False),
    ("Summarise the quarterly sales report", "job", False),
    ("Summarise the quarterly sales report", "manager", False),
    ("How many moons does Jupiter have?", "passport_expiry", False),
    ("Write a haiku about autumn leaves", "current_book", False),
    ("Translate good morning into French", "answer_style", False),
    ("What is the boiling point of water?", "drinks", False),
    ("What is the boiling point of water?", "coffee_order", False),
    ("List the prime numbers below twenty", "wedding_anniversary", False),
    ("Who won the 2018 World Cup?", "sport", False),
    ("How do I bake sourdough bread?", "favourite_food", False),
    ("How do I bake sourdough bread?", "diet", False),
]

PAIRS: list[Pair] = RELEVANT + HARD_NEGATIVES + UNRELATED
