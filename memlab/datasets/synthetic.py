"""Synthetic PersonaMem-format data: procedural personas whose preferences change, with reasons.

``generate(personas=2, seed=0, sessions=8)`` builds one history per persona in PersonaMem's shape
(every session opens with a ``system`` message carrying the persona; user/assistant turns follow)
and multiple-choice questions of all seven canonical types about it. Everything is drawn from a
``random.Random`` seeded by the arguments, so the same arguments always give the same dataset;
nothing is read from disk or the network.

What a history holds, per persona:

- stable facts (job, city, pet, sibling, instrument), each stated once by the user;
- preferences over several aspects ("pizza", "running", "jazz"): a first stance, then one or two
  changes, each stated with a reason ("I've given up pizza. The reason is going gluten-free ...");
- mentions of things the user already did within a liked aspect (for "suggest new ideas");
- filler small talk around all of it, so a memory has to find the few turns that matter.

Questions are asked at session boundaries and mid-session (``end_index``), and their correct
answers follow the state at that point: the same aspect asked about later can have another answer.
Each question records:

- ``evidence``: the user turns that hold the answer, as ``"m<message index>"`` strings (all
  before ``end_index``); ``distance_blocks``/``distance_tokens`` measure from the earliest one;
- ``metadata["option_kinds"]``: what each option is (``correct``, ``stale``, ``wrong_item``,
  ``generic``, ``reversed`` ...), in option order, so errors can be broken down by distractor;
- ``metadata["key"]``: the text of the evidence turn the answer hinges on (fact value, reason,
  item), and ``metadata["subject"]``: the fact kind or aspect asked about.

Options are built from one template per question with the slot filled by the correct value and
by distractor values drawn from the same pools, then shuffled, so option length does not give
the answer away (a longest-option reader stays near 25%).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memlab.datasets.base import Dataset, History, split_at_system
from memlab.datasets.question_types import (
    ACKNOWLEDGE_LATEST,
    CANONICAL_TYPES,
    GENERALIZE,
    RECALL_FACTS,
    RECOMMEND,
    REVISIT_REASONS,
    SUGGEST_NEW,
    TRACK_EVOLUTION,
)
from memlab.tokens import count_tokens
from memlab.types import OPTION_LETTERS, Message, Question

LIKE, DISLIKE, INDIFFERENT = "like", "dislike", "indifferent"
STANCES = (LIKE, DISLIKE, INDIFFERENT)

# --- content ---------------------------------------------------------------------------------
# Reason texts use {my}/{me}/{I}: the user says "my doctor", the assistant says "your doctor".


@dataclass(frozen=True)
class Reason:
    text: str
    motive: str


@dataclass(frozen=True)
class Aspect:
    item: str
    cues: tuple[str, ...]
    scenario: str
    recommendation: str
    ideas: tuple[str, ...]
    reasons: dict[str, tuple[Reason, ...]]


def _r(*pairs: tuple[str, str]) -> tuple[Reason, ...]:
    return tuple(Reason(text, motive) for text, motive in pairs)


ASPECTS: tuple[Aspect, ...] = (
    Aspect(
        "pizza",
        ("A new pizzeria just opened around the corner from me.", "My colleagues ordered pizza for the whole office today."),
        "Some friends want to do a street-food market crawl on Saturday.",
        "a slice at the wood-fired pizzeria on Market Street",
        ("making Neapolitan dough from scratch", "grilling pizza on the barbecue", "a white pizza with ricotta and figs",
         "a deep-dish pizza night", "a pizza-tasting tour of the old town"),
        {LIKE: _r(("a trip to Naples where {I} finally tasted the real thing", "curiosity"),
                  ("{my} flatmates starting a Friday pizza night", "social")),
         DISLIKE: _r(("going gluten-free on {my} doctor's advice", "health"),
                     ("how much takeaway pizza was costing {me} every month", "budget")),
         INDIFFERENT: _r(("getting tired of the same toppings everywhere", "curiosity"),
                         ("the delivery boxes piling up in the recycling", "environment"))},
    ),
    Aspect(
        "running",
        ("I saw a huge group of runners in the park this morning.", "My neighbour just signed up for a marathon."),
        "My friends are signing up for a charity cycling race.",
        "the Saturday morning run along the canal",
        ("a trail half-marathon", "the weekly parkrun", "interval sessions on the track", "a night run with head torches",
         "a beach run at sunrise"),
        {LIKE: _r(("joining a friendly Sunday running club", "social"),
                  ("training for a charity 10k for {my} old school", "mastery")),
         DISLIKE: _r(("a knee injury from a fall on an icy trail", "body"),
                     ("the stress of competitive races taking the fun out of it", "calm")),
         INDIFFERENT: _r(("a hectic new work schedule that leaves little time for long runs", "time"),
                         ("discovering that cycling gives {me} the same buzz", "curiosity"))},
    ),
    Aspect(
        "jazz",
        ("There was a jazz band playing at the station today.", "A friend sent me a playlist of old jazz records."),
        "I've been offered a ticket to a blues festival next month.",
        "the trio playing at the Blue Lantern jazz bar",
        ("a vinyl night of Blue Note records", "a jazz brunch at the hotel bar", "a swing-dance class",
         "an open-air jazz festival", "a masterclass with a local saxophonist"),
        {LIKE: _r(("a late-night jam session {I} stumbled into on holiday", "curiosity"),
                  ("learning to play a few standards on the piano", "mastery")),
         DISLIKE: _r(("sitting through a painfully long free-jazz concert", "calm"),
                     ("ticket prices at the jazz club doubling", "budget")),
         INDIFFERENT: _r(("hearing it so much at work that it became background noise", "calm"),
                         ("{my} friends losing interest in going to gigs", "social"))},
    ),
    Aspect(
        "board games",
        ("My neighbour asked if I want to join a board-game evening.", "I found an old chess set while clearing the attic."),
        "A colleague invited me to a weekly trivia league at the pub.",
        "a games night at the board-game café",
        ("a legacy campaign game", "a board-game design workshop", "a murder-mystery party", "a speed-chess evening",
         "a tabletop role-playing one-shot"),
        {LIKE: _r(("a games café opening near {my} flat", "social"),
                  ("discovering cooperative games where nobody loses alone", "calm")),
         DISLIKE: _r(("a family game night that ended in a huge argument", "calm"),
                     ("spending far too much on expansions {I} never played", "budget")),
         INDIFFERENT: _r(("game nights taking up whole weekends", "time"),
                         ("{my} group switching to video games", "social"))},
    ),
    Aspect(
        "horror movies",
        ("The cinema is running a horror film festival this month.", "My cousin keeps recommending a new scary film."),
        "There's an immersive theatre show about ghosts coming to town.",
        "the horror double feature at the Rex cinema",
        ("a midnight screening of a silent horror classic", "an escape room with a horror theme", "a Korean horror double bill",
         "a horror short-film festival", "a ghost walk through the old town"),
        {LIKE: _r(("a friend's Halloween marathon that turned out to be a blast", "social"),
                  ("getting into the craft of practical effects", "mastery")),
         DISLIKE: _r(("nightmares that kept {me} awake for a week", "health"),
                     ("one too many cheap jump-scare sequels", "curiosity")),
         INDIFFERENT: _r(("the plots all starting to feel the same", "curiosity"),
                         ("late screenings clashing with early shifts", "time"))},
    ),
    Aspect(
        "camping",
        ("My cousin just bought a new tent and keeps sending me photos.", "I saw an advert for a lakeside campsite today."),
        "My friends are planning a hiking trip with hostel stays.",
        "a night at the lakeside campsite",
        ("wild camping by a lake", "a canoe-camping trip", "a winter camping weekend", "glamping in a yurt",
         "a bikepacking overnighter"),
        {LIKE: _r(("a starry weekend in the mountains with {my} cousins", "social"),
                  ("learning how cheap a weekend outdoors can be", "budget")),
         DISLIKE: _r(("a back problem that makes sleeping on the ground miserable", "body"),
                     ("a trip ruined by a week of non-stop rain", "calm")),
         INDIFFERENT: _r(("campsites getting crowded and noisy", "calm"),
                         ("not having free weekends any more", "time"))},
    ),
    Aspect(
        "coffee",
        ("A fancy coffee bar opened next to my office.", "A friend brought me a bag of coffee beans from her trip."),
        "A new tea house is running tasting evenings.",
        "a flat white at the new specialty coffee bar",
        ("cold-brewing at home", "a coffee-cupping session", "an Aeropress competition", "a latte-art workshop",
         "a roastery tour"),
        {LIKE: _r(("a barista course that taught {me} to taste the difference", "mastery"),
                  ("morning chats at the café next to {my} office", "social")),
         DISLIKE: _r(("caffeine giving {me} heart palpitations", "health"),
                     ("the waste from all those single-use cups", "environment")),
         INDIFFERENT: _r(("switching to green tea for calmer mornings", "calm"),
                         ("a tighter budget that ruled out fancy cafés", "budget"))},
    ),
    Aspect(
        "yoga",
        ("My gym just added more yoga classes to the timetable.", "A yoga studio is handing out free trial passes."),
        "My gym is launching a pilates course.",
        "a drop-in class at the yoga studio",
        ("a sunrise yoga session on the beach", "aerial yoga", "a weekend yoga retreat", "yin yoga before bed",
         "paddleboard yoga"),
        {LIKE: _r(("a physio recommending it for {my} back", "body"),
                  ("a free outdoor class in the park every Saturday", "budget")),
         DISLIKE: _r(("a hot-yoga class that left {me} dizzy and dehydrated", "health"),
                     ("an instructor who made every class feel like a competition", "calm")),
         INDIFFERENT: _r(("finding that long walks relax {me} just as well", "curiosity"),
                         ("classes moving to a time that clashes with work", "time"))},
    ),
    Aspect(
        "podcasts",
        ("A colleague keeps telling me about a podcast she loves.", "My phone suggested a new podcast this morning."),
        "A friend suggested I try audiobooks on my commute.",
        "the new episode of that history podcast",
        ("a true-crime podcast marathon", "recording an episode with a friend", "a live podcast taping",
         "a language-learning podcast", "a podcast book club"),
        {LIKE: _r(("a long commute that needed filling", "time"),
                  ("a history series that taught {me} more than school did", "mastery")),
         DISLIKE: _r(("realising they made {me} anxious before bed", "calm"),
                     ("every show turning into one long advert", "curiosity")),
         INDIFFERENT: _r(("starting to cycle to work instead of taking the train", "environment"),
                         ("audiobooks taking over {my} listening time", "curiosity"))},
    ),
    Aspect(
        "gardening",
        ("The garden centre near me is having a big sale.", "My neighbour gave me a box of seedlings."),
        "My neighbour wants help setting up a balcony herb box.",
        "an afternoon at the community garden",
        ("a vertical herb garden", "composting kitchen scraps", "a wildflower meadow patch", "growing chillies indoors",
         "a seed swap at the library"),
        {LIKE: _r(("growing {my} own tomatoes to cut grocery bills", "budget"),
                  ("wanting to eat more local, pesticide-free food", "environment")),
         DISLIKE: _r(("a wrist strain from hours of weeding", "body"),
                     ("slugs wiping out a whole season of work", "calm")),
         INDIFFERENT: _r(("a busy season at work that left no time for the allotment", "time"),
                         ("the allotment society getting cliquey", "social"))},
    ),
    Aspect(
        "karaoke",
        ("My team wants to do a karaoke night next Friday.", "A karaoke bar opened near the station."),
        "My friends want to try an open-mic comedy night.",
        "karaoke night at the Crown pub",
        ("a duet night with a friend", "a musical-theatre karaoke evening", "a private karaoke booth",
         "a karaoke contest at the pub", "learning a song in Japanese"),
        {LIKE: _r(("a team outing where everyone cheered {me} on", "social"),
                  ("taking a few singing lessons", "mastery")),
         DISLIKE: _r(("a throat infection that left {me} hoarse for weeks", "health"),
                     ("bars charging a fortune per song", "budget")),
         INDIFFERENT: _r(("the same people hogging the microphone every time", "social"),
                         ("the late nights wrecking {my} sleep", "health"))},
    ),
    Aspect(
        "sushi",
        ("I walked past a new sushi bar on my way home.", "A friend posted photos of an amazing sushi dinner."),
        "A new poke bowl place opened near my work.",
        "the conveyor-belt sushi place downtown",
        ("an omakase dinner at the counter", "rolling maki at home", "a fish-market breakfast tour",
         "vegan sushi with pickled vegetables", "a hand-roll party"),
        {LIKE: _r(("a sushi-making class with a chef from Osaka", "curiosity"),
                  ("learning that it can be a light, healthy dinner", "health")),
         DISLIKE: _r(("worries about overfishing and mercury", "environment"),
                     ("a bad oyster that made {me} ill", "health")),
         INDIFFERENT: _r(("the nearest good place closing down", "time"),
                         ("finding it too pricey for what it is", "budget"))},
    ),
)

# How each motive behind a change carries over to a new situation (generalize_to_new_scenarios).
MOTIVE_ADVICE: dict[str, tuple[str, ...]] = {
    "health": ("Check whether it fits the way you eat and look after yourself these days; ask about options that suit you.",
               "Think about how it would sit with your health; pick the version that keeps you feeling well afterwards."),
    "budget": ("Look at the full cost first; if it stretches your budget, a cheaper version of the same idea may be smarter.",
               "Add up what it would really cost you; a free or low-cost alternative could give you most of the fun."),
    "time": ("Think about how much of your week it would take; if your schedule is already packed, keep the commitment short.",
             "Be realistic about the hours involved; a one-off taster would fit your busy weeks better than a long course."),
    "body": ("Consider how hard it would be on your body; a gentler, low-impact version could spare you aches afterwards.",
             "Mind the physical strain; warm up properly and choose the easier option if anything starts to hurt."),
    "social": ("See if someone you get on with wants to come along; sharing it is what usually makes these things click for you.",
               "Treat it as a chance to meet new people; the social side is usually what wins you over."),
    "calm": ("Ask yourself whether it would be loud, crowded or stressful; a quieter, relaxed version may be more your speed.",
             "Go in without pressure; if it starts to feel competitive or hectic, it is fine to step back and just enjoy it."),
    "environment": ("Look into its environmental footprint; a greener, more local option would sit better with your values.",
                    "Check how much waste and travel it involves; the low-impact choice will probably feel right to you."),
    "curiosity": ("Treat it as a chance to try the authentic version of something new; discovery is what usually hooks you.",
                  "Go for the most original take on it you can find; novelty is what keeps these things interesting for you."),
    "mastery": ("Check whether you would learn a real skill from it; having something to get better at keeps you motivated.",
                "Look for a version with a bit of coaching; you enjoy things more when you can see yourself improving."),
}

FACT_POOLS: dict[str, tuple[str, ...]] = {
    "job": ("nurse", "software developer", "high-school teacher", "architect", "pharmacist", "graphic designer",
            "accountant", "electrician", "chef", "librarian", "veterinarian", "journalist"),
    "city": ("Lisbon", "Porto", "Valencia", "Lyon", "Leeds", "Glasgow", "Utrecht", "Ghent", "Bologna", "Kraków",
             "Dublin", "Bristol"),
    "pet": ("beagle named Biscuit", "tabby cat called Miso", "parrot named Kiwi", "rabbit called Clover",
            "greyhound named Pepper", "black cat called Olive", "border collie named Rolo", "tortoise called Basil"),
    "sibling": ("sister Maya", "brother Tom", "sister Priya", "brother Luca", "sister Ingrid", "brother Kenji",
                "sister Amara", "brother Pablo"),
    "instrument": ("guitar", "piano", "violin", "cello", "drums", "ukulele", "saxophone", "flute", "trumpet",
                   "bass guitar"),
}


def _article(word: str) -> str:
    return "an" if word[0].lower() in "aeiou" else "a"


FACT_STATEMENTS: dict[str, tuple[str, ...]] = {
    "job": ("I work as {art} {v}, so my days are pretty full.", "My shift as {art} {v} ran late again today.",
            "Being {art} {v} keeps me on my toes."),
    "city": ("I live in {v}, and the weather here has been all over the place.",
             "I moved to {v} a few years ago and still love exploring it.",
             "Here in {v} the trams were packed this morning."),
    "pet": ("I have {art} {v}, and he kept me up all night.", "I took my {v} to the vet for a check-up yesterday.",
            "My {v} has learned a new trick!"),
    "sibling": ("My {v} is visiting next month.", "I had dinner with my {v} yesterday.", "My {v} called me for advice today."),
    "instrument": ("I play the {v} in my spare time.", "I practised the {v} for an hour tonight.",
                   "I've been learning a new song on the {v}."),
}

FACT_QUESTIONS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    # kind: (question, templates with {v}, generic variants that ignore the user)
    "job": ("Any tips for staying energised through a long working day?",
            ("Being {art} {v}, you could take short breaks between tasks to recharge.",),
            ("Whatever the job, you could take short breaks between tasks to recharge.",
             "With any kind of work, you could take short breaks between tasks to recharge.",
             "Like most people, you could take short breaks between tasks to recharge.")),
    "city": ("Any idea for a relaxed day out close to home?",
             ("Since you live in {v}, a walk through the old town and a café stop could be lovely.",),
             ("Since you want to stay close, a walk and a café stop could be lovely.",
              "Wherever you are, a walk through the nearest old town and a café stop could be lovely.",
              "Since you'd like to stay nearby, a walk through town and a café stop could be lovely.")),
    "pet": ("I want to get my pet a little present. Any ideas?",
            ("For your {v}, a new toy and some tasty treats would go down well.",),
            ("For pretty much any pet, a new toy and some tasty treats would go down well.",
             "For most animals, a new toy and some tasty treats would go down well.",
             "Whatever kind of pet you have, a new toy and some tasty treats would go down well.")),
    "sibling": ("I'd like to plan a fun day with my sibling. Any ideas?",
                ("With your {v}, a picnic and a long walk could make a great day out.",),
                ("With a brother or sister, a picnic and a long walk could make a great day out.",
                 "With family, a picnic and a long walk could make a great day out.",
                 "With any sibling, a picnic and a long walk could make a great day out.")),
    "instrument": ("I want to get better at my instrument. How should I practise?",
                   ("For the {v}, short daily sessions with a metronome beat one long weekly slog.",),
                   ("For any instrument, short daily sessions with a metronome beat one long weekly slog.",
                    "Whatever you play, short daily sessions with a metronome beat one long weekly slog.",
                    "In general, short daily sessions with a metronome beat one long weekly slog.")),
}

FIRST_STANCE: dict[str, tuple[str, ...]] = {
    LIKE: ("I love {item}.", "I count {item} among my favourite things.", "I'm really into {item} these days.",
           "Nothing beats {item} for me."),
    DISLIKE: ("I can't stand {item}.", "I really don't enjoy {item}.", "I'm just not into {item}.",
              "I've never liked {item}, to be honest."),
    INDIFFERENT: ("I can take or leave {item}.", "I don't feel much either way about {item}.",
                  "I'm pretty neutral about {item}."),
}

CHANGE_STANCE: dict[str, tuple[str, ...]] = {
    LIKE: ("I've come around to {item}: {reason} changed my mind.", "These days I'm really into {item}, all because of {reason}.",
           "Guess what, I enjoy {item} now. It started with {reason}.",
           "I used to feel differently, but after {reason} I actually like {item}."),
    DISLIKE: ("I've given up {item}. The reason is {reason}.", "I no longer enjoy {item}, mainly because of {reason}.",
              "After {reason}, I just can't get into {item} anymore.", "I stopped bothering with {item}; {reason} put me off."),
    INDIFFERENT: ("I've cooled off on {item}: since {reason}, it doesn't really matter to me.",
                  "These days I'm lukewarm about {item}, mostly because of {reason}.",
                  "After {reason}, I can take or leave {item}."),
}

IDEA_MENTIONS = ("I tried {idea} last weekend and loved it.", "I finally did {idea}, which was great fun.",
                 "Last week I went for {idea}; so good.", "I spent Saturday on {idea}.")

LEADS = ("", "", "By the way, ", "Quick update: ", "Oh, something I meant to say: ", "Random thought: ")
TAILS = ("", "", " Anyway, how are you today?", " Just thought I'd mention it.", " Funny how things go.")

EVENT_REPLIES = ("Thanks for telling me, I'll keep that in mind.", "Good to know! I'll remember that.",
                 "That's useful to hear, thanks for sharing.", "Noted. It helps me understand you better.",
                 "I appreciate you telling me that.")
CHANGE_REPLIES = ("That's quite a change, thanks for explaining why.", "Interesting, it makes sense that this changed your view.",
                  "Thanks for telling me what changed your mind.", "Got it. People's tastes shift for good reasons.")
IDEA_REPLIES = ("That sounds like a great experience!", "How fun, I'm glad you enjoyed it.",
                "Nice! It sounds like it was worth it.", "That must have been memorable.")

# Small talk as (user, assistant) pairs; a filler turn may combine two of them.
FILLER: tuple[tuple[str, str], ...] = (
    ("The weather has been so grey lately, I keep forgetting what the sun looks like.",
     "Grey weeks are tough; a bright lamp in the morning can help a little."),
    ("Work was pretty hectic today; three meetings back to back.",
     "That sounds draining. I hope you get a quiet evening to recover."),
    ("I'm thinking about reorganising my bookshelf by colour. Is that silly?",
     "Not silly at all; whatever makes the space feel like yours is worth doing."),
    ("Do you know any good tricks for remembering people's birthdays?",
     "A shared calendar with reminders a few days ahead works well for many people."),
    ("My train was delayed again this morning.",
     "That's frustrating. A good book can make delays less painful."),
    ("I can't decide whether to repaint the kitchen or just leave it.",
     "Writing down the pros and cons and sleeping on it might help you decide."),
    ("I finally answered all my emails, which feels like a small victory.",
     "Small wins like that are worth celebrating."),
    ("What's a good way to keep houseplants alive while I'm away for a few days?",
     "Water them well before you go and move them out of direct sun; a wick from a water glass also helps."),
    ("I watched a documentary about deep-sea creatures last night. Wild stuff.",
     "The deep sea is fascinating; some of those animals look like they come from another planet."),
    ("Is it normal to feel tired even after a full night's sleep?",
     "It happens; stress or late screen time can play a part. If it lasts, a doctor can check."),
    ("I need to buy a present for a colleague who is retiring.",
     "A thoughtful card with a personal note often means more than an expensive gift."),
    ("My neighbour's dog barked for an hour straight this evening.",
     "That's hard on the nerves. Maybe a friendly word with the neighbour would help."),
    ("I tried to fix a leaky tap myself and made it worse.",
     "Plumbing is trickier than it looks; turning off the water under the sink buys you time."),
    ("How do people stay organised with so many apps and calendars?",
     "Keeping a single list in one place usually beats spreading tasks across apps."),
    ("I've been meaning to call my old school friend but keep putting it off.",
     "Sending a short message first can make the call feel easier."),
    ("The supermarket rearranged all its aisles and now I can't find anything.",
     "Shops do that to make people browse; it gets familiar again after a visit or two."),
    ("I'm trying to drink more water during the day. Any tips?",
     "A bottle on your desk is a simple reminder to keep drinking."),
    ("There's roadwork outside my window starting at seven every morning.",
     "That's an early alarm you didn't ask for. Earplugs might save your weekends."),
    ("I started a new notebook for to-do lists. Let's see how long it lasts.",
     "Good luck with it! Starting is often the hardest part."),
    ("I saw the most beautiful sunset on my way home today.",
     "Moments like that are a nice reminder to slow down."),
    ("My laptop has been really slow this week.",
     "A restart and clearing some storage can make a surprising difference."),
    ("What's a polite way to decline an invitation?",
     "Something like 'Thank you so much, but I can't make it this time' is kind and clear."),
    ("I lost my umbrella for the third time this year.",
     "Maybe it's time for a cheap spare that lives in your bag."),
    ("I spent the evening sorting out old photos on my phone.",
     "That can be surprisingly emotional. Did you find any favourites?"),
    ("My upstairs neighbours are moving out this weekend.",
     "Fingers crossed the new ones are quiet and friendly."),
    ("I keep forgetting where I put my keys.",
     "A small bowl or hook by the door gives them a home and saves the morning search."),
    ("I signed up for a newsletter and now I get three emails a day.",
     "Unsubscribing feels great; most have a link right at the bottom."),
    ("The heating in my building has been acting up.",
     "Worth reporting it to the landlord in writing so there's a record."),
    ("I made soup for the first time in ages.",
     "Homemade soup is so comforting, and it freezes well too."),
    ("I can never decide what to watch in the evening.",
     "Picking from a short list you made earlier takes the pressure off."),
)

ACK_FAMILIES: tuple[dict[str, str], ...] = (
    {LIKE: "I remember you love {item}, so that must have caught your eye.",
     DISLIKE: "I remember you don't enjoy {item}, so you probably walked right past.",
     INDIFFERENT: "I remember you feel pretty neutral about {item}, so it may not matter much."},
    {LIKE: "Since you count {item} among your favourite things, that sounds like good news.",
     DISLIKE: "Since you're not really into {item}, that probably won't tempt you much.",
     INDIFFERENT: "Since you can take or leave {item}, you might not be bothered either way."},
    {LIKE: "Given how much you enjoy {item}, you'll probably want to check it out soon.",
     DISLIKE: "Given that you avoid {item} these days, you'll likely give it a miss.",
     INDIFFERENT: "Given that you feel lukewarm about {item}, you might just shrug it off."},
)
ACK_GENERIC = ("That sounds like an interesting bit of news; let me know how it goes.",
               "Oh, nice! Tell me more about it when you get the chance.",
               "Thanks for sharing that. Is there anything you'd like to do about it?",
               "That's good to hear about. Things like that can really brighten up a day.",
               "Interesting! It's always nice when something new pops up nearby.")

TRACK_THREE = (
    ("At first you {p0} {item}, then you {p1} it, and now you {n2} it.",
     {LIKE: "loved", DISLIKE: "disliked", INDIFFERENT: "felt lukewarm about"},
     {LIKE: "love", DISLIKE: "dislike", INDIFFERENT: "feel lukewarm about"}),
    ("Your take on {item} went from {p0} to {p1}, and now it's {n2}.",
     {LIKE: "real enthusiasm", DISLIKE: "outright dislike", INDIFFERENT: "indifference"},
     {LIKE: "real enthusiasm", DISLIKE: "outright dislike", INDIFFERENT: "indifference"}),
)
TRACK_TWO = (
    ("You used to {p0} {item}, but now you {n1} it.",
     {LIKE: "love", DISLIKE: "dislike", INDIFFERENT: "feel lukewarm about"},
     {LIKE: "love", DISLIKE: "dislike", INDIFFERENT: "feel lukewarm about"}),
    ("Your take on {item} went from {p0} to {n1}.",
     {LIKE: "real enthusiasm", DISLIKE: "outright dislike", INDIFFERENT: "indifference"},
     {LIKE: "real enthusiasm", DISLIKE: "outright dislike", INDIFFERENT: "indifference"}),
)
TRACK_QUESTIONS = ("I've been thinking about how my feelings about {item} have changed over time. Can you sum it up?",
                   "How would you describe the way my opinion of {item} has evolved?",
                   "Remind me how my attitude to {item} has shifted since we started talking.")
REVISIT_QUESTIONS = ("Remind me, what was it that changed my mind about {item}?",
                     "I was telling a friend how my feelings about {item} shifted. What was behind the latest change?",
                     "Why did my opinion of {item} change most recently?")
REVISIT_OPTIONS = ("It was {reason}.", "That came from {reason}.", "You said it was down to {reason}.")
RECOMMEND_QUESTIONS = ("I have a free evening coming up and want to treat myself. What would you suggest?",
                       "Got any ideas for something I'd enjoy this weekend?",
                       "I need a pick-me-up after a long week. Any recommendation?")
RECOMMEND_OPTIONS = ("How about {rec}? It sounds right up your street.", "You could go for {rec}; I think you'd enjoy it.",
                     "Why not treat yourself to {rec}?")
SUGGEST_QUESTIONS = ("I want to shake things up with {item}. Got any ideas I haven't tried yet?",
                     "What's something new I could do with {item}?",
                     "I'm in a bit of a rut with {item}. Any fresh ideas?")
SUGGEST_OPTIONS = ("How about {idea}? It would be something new for you.", "You could try {idea} next.",
                   "Maybe give {idea} a go this month.")
GENERALIZE_TAILS = (" Should I give it a go?", " What do you think?", " Any advice before I decide?")

FIRST_NAMES = ("Amelia", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Isla", "Jonas", "Keira",
               "Leo", "Mina", "Nikolai", "Olu", "Paula", "Quentin", "Rosa", "Samir", "Tess")
LAST_NAMES = ("Adler", "Bianchi", "Costa", "Dubois", "Eriksen", "Fischer", "García", "Hughes", "Ivanova", "Jensen",
              "Kowalski", "Lindqvist", "Moreau", "Novak", "Okafor", "Petrov", "Quinn", "Rossi", "Silva", "Tanaka")


# --- persona plan ----------------------------------------------------------------------------


def _person(text: str, *, user: bool) -> str:
    return text.format(my="my" if user else "your", me="me" if user else "you", I="I" if user else "you")


def _fill(template: str, **slots: str) -> str:
    return template.format(**slots)


@dataclass
class _StanceStep:
    stance: str
    session: int
    reason: Reason | None = None
    index: int = -1  # message index of the user turn, set when the history is rendered


@dataclass
class _AspectPlan:
    aspect: Aspect
    steps: list[_StanceStep]
    idea_mentions: list[tuple[int, str, int]] = field(default_factory=list)  # (session, idea, message index)


@dataclass(eq=False)  # compared by identity when ordering a session
class _Event:
    session: int
    kind: str  # fact | stance | idea
    user_text: str
    reply: str
    bind: Callable[[int], None]  # records the message index of the user turn
    after: "_Event | None" = None  # an event that must come earlier in the same session


@dataclass
class _Persona:
    number: int
    name: str
    age: int
    facts: dict[str, tuple[str, int]]  # kind -> (value, message index)
    aspects: list[_AspectPlan]


def _plan_aspect(aspect: Aspect, sessions: int, rng: random.Random) -> _AspectPlan:
    count = 3 if sessions >= 4 and rng.random() < 0.5 else 2
    order = list(STANCES)
    rng.shuffle(order)
    first = rng.randrange(0, max(1, sessions // 3) + 1)
    later = sorted(rng.sample(range(first + 1, sessions), count - 1))
    steps = [_StanceStep(order[0], first)]
    for stance, session in zip(order[1:count], later):
        steps.append(_StanceStep(stance, session, rng.choice(aspect.reasons[stance])))
    return _AspectPlan(aspect, steps)


def _events(persona_facts: dict[str, str], plans: list[_AspectPlan], facts_out: dict[str, tuple[str, int]],
            sessions: int, rng: random.Random) -> list[_Event]:
    events: list[_Event] = []

    def wrap(text: str) -> str:
        lead = rng.choice(LEADS)
        if lead and not (text.startswith("I ") or text.startswith("I'")):
            text = text[:1].lower() + text[1:]
        return lead + text + rng.choice(TAILS)

    for kind, value in persona_facts.items():
        statement = rng.choice(FACT_STATEMENTS[kind]).format(v=value, art=_article(value))
        session = rng.randrange(0, max(1, sessions - 1))

        def bind(index: int, kind: str = kind, value: str = value) -> None:
            facts_out[kind] = (value, index)

        events.append(_Event(session, "fact", wrap(statement[:1].upper() + statement[1:]), rng.choice(EVENT_REPLIES), bind))
    for plan in plans:
        item = plan.aspect.item
        for number, step in enumerate(plan.steps):
            if step.reason is None:
                text = _fill(rng.choice(FIRST_STANCE[step.stance]), item=item)
                reply = rng.choice(EVENT_REPLIES)
            else:
                text = _fill(rng.choice(CHANGE_STANCE[step.stance]), item=item, reason=_person(step.reason.text, user=True))
                reply = rng.choice(CHANGE_REPLIES)
            text = text[:1].upper() + text[1:]

            def bind_step(index: int, step: _StanceStep = step) -> None:
                step.index = index

            event = _Event(step.session, "stance", wrap(text), reply, bind_step)
            events.append(event)
            if step.stance != LIKE:
                continue
            # Things the user already did while liking the aspect: the "not new" ideas.
            end = plan.steps[number + 1].session if number + 1 < len(plan.steps) else sessions
            ideas = rng.sample(plan.aspect.ideas, 3)
            for idea in ideas:
                session = rng.randrange(step.session, max(step.session + 1, end))

                def bind_idea(index: int, plan: _AspectPlan = plan, session: int = session, idea: str = idea) -> None:
                    plan.idea_mentions.append((session, idea, index))

                mention = rng.choice(IDEA_MENTIONS).format(idea=idea)
                events.append(_Event(session, "idea", wrap(mention), rng.choice(IDEA_REPLIES), bind_idea,
                                     after=event if session == step.session else None))
    return events


def _render(persona: _Persona, events: list[_Event], sessions: int, turns: int, rng: random.Random) -> list[Message]:
    messages: list[Message] = []
    for session in range(sessions):
        messages.append(Message(role="system", content=(
            f"Current user persona: Name: {persona.name}. Age: {persona.age}. {persona.name} chats with the "
            f"assistant about everyday life. This is conversation {session + 1} of {sessions}.")))
        mine = [e for e in events if e.session == session]
        rng.shuffle(mine)
        # An idea mention must follow the stance it depends on when both land in one session.
        for event in list(mine):
            if event.after is not None and event.after in mine and mine.index(event.after) > mine.index(event):
                mine.remove(event)
                mine.insert(mine.index(event.after) + 1, event)
        pairs = max(turns // 2, len(mine) + 1)
        slots = sorted(rng.sample(range(pairs), len(mine)))
        queue = iter(mine)
        for pair in range(pairs):
            if slots and pair == slots[0]:
                slots.pop(0)
                event = next(queue)
                event.bind(len(messages))
                messages.append(Message(role="user", content=event.user_text))
                messages.append(Message(role="assistant", content=event.reply))
            else:
                chosen = rng.sample(FILLER, 2 if rng.random() < 0.35 else 1)
                messages.append(Message(role="user", content=" ".join(u for u, _ in chosen)))
                messages.append(Message(role="assistant", content=" ".join(a for _, a in chosen)))
    return messages


# --- questions -------------------------------------------------------------------------------


@dataclass
class _Draft:
    """A question before shuffling: options as (text, kind), the first one correct."""

    subject: str
    text: str
    options: list[tuple[str, str]]
    evidence: list[int]
    key: str


def _closest(variants: Sequence[str], length: int, rng: random.Random) -> str:
    """The generic variant nearest in length to ``length``, so generic options do not stand out."""
    ranked = sorted(variants, key=lambda v: (abs(len(v) - length), v))
    return ranked[0] if rng.random() < 0.7 else rng.choice(ranked[:2])


class _State:
    """What the user has said before message ``end``."""

    def __init__(self, persona: _Persona, end: int) -> None:
        self.persona = persona
        self.end = end

    def facts(self) -> dict[str, tuple[str, int]]:
        return {k: v for k, v in self.persona.facts.items() if v[1] < self.end}

    def steps(self, plan: _AspectPlan) -> list[_StanceStep]:
        return [s for s in plan.steps if 0 <= s.index < self.end]

    def current(self, plan: _AspectPlan) -> str | None:
        steps = self.steps(plan)
        return steps[-1].stance if steps else None

    def ideas(self, plan: _AspectPlan) -> list[tuple[str, int]]:
        return [(idea, index) for _session, idea, index in plan.idea_mentions if index < self.end]


def _recall(state: _State, kind: str, rng: random.Random) -> _Draft | None:
    fact = state.facts().get(kind)
    if fact is None:
        return None
    value, index = fact
    question, templates, generics = FACT_QUESTIONS[kind]
    template = rng.choice(templates)
    wrong = rng.sample([v for v in FACT_POOLS[kind] if v != value], 2)
    options = [(template.format(v=v, art=_article(v)), kind_) for v, kind_ in
               ((value, "correct"), (wrong[0], "wrong_item"), (wrong[1], "wrong_item"))]
    generic = _closest(generics, len(rng.choice(options)[0]), rng)
    return _Draft(kind, question, options + [(generic, "generic")], [index], value)


def _acknowledge(state: _State, plan: _AspectPlan, rng: random.Random) -> _Draft | None:
    steps = state.steps(plan)
    if not steps:
        return None
    item = plan.aspect.item
    family = rng.choice(ACK_FAMILIES)
    current = steps[-1].stance
    stale = steps[-2].stance if len(steps) > 1 else None
    options = [(_fill(family[current], item=item), "correct")]
    for stance in STANCES:
        if stance != current:
            options.append((_fill(family[stance], item=item), "stale" if stance == stale else "other_stance"))
    generic = _closest(ACK_GENERIC, len(rng.choice(options)[0]), rng)
    return _Draft(item, rng.choice(plan.aspect.cues), options + [(generic, "generic")], [steps[-1].index], item)


def _track(state: _State, plan: _AspectPlan, rng: random.Random) -> _Draft | None:
    steps = state.steps(plan)
    if len(steps) < 2:
        return None
    item = plan.aspect.item
    truth = tuple(s.stance for s in steps)
    if len(truth) == 3:
        template, past, now = rng.choice(TRACK_THREE)
        others = [p for p in _permutations(STANCES) if p not in (truth, truth[::-1])]
    else:
        template, past, now = rng.choice(TRACK_TWO)
        others = [(a, b) for a in STANCES for b in STANCES if a != b and (a, b) not in (truth, truth[::-1])]

    def say(seq: tuple[str, ...]) -> str:
        slots = {f"p{i}": past[s] for i, s in enumerate(seq[:-1])}
        slots[f"n{len(seq) - 1}"] = now[seq[-1]]
        return _fill(template, item=item, **slots)

    options = [(say(truth), "correct"), (say(truth[::-1]), "reversed")]
    options += [(say(seq), "wrong_sequence") for seq in rng.sample(others, 2)]
    return _Draft(item, _fill(rng.choice(TRACK_QUESTIONS), item=item), options, [s.index for s in steps], item)


def _permutations(values: Sequence[str]) -> list[tuple[str, ...]]:
    if len(values) <= 1:
        return [tuple(values)]
    return [(v, *rest) for i, v in enumerate(values) for rest in _permutations([*values[:i], *values[i + 1:]])]


def _revisit(state: _State, plan: _AspectPlan, rng: random.Random) -> _Draft | None:
    changes = [s for s in state.steps(plan) if s.reason is not None]
    if not changes:
        return None
    item = plan.aspect.item
    latest = changes[-1].reason
    assert latest is not None
    template = rng.choice(REVISIT_OPTIONS)
    stale = changes[-2].reason if len(changes) > 1 else None
    pool = [r for stance in STANCES for r in plan.aspect.reasons[stance] if r not in (latest, stale)]
    picks: list[tuple[Reason, str]] = [(latest, "correct")]
    if stale is not None:
        picks.append((stale, "stale"))
    picks += [(r, "other_reason") for r in rng.sample(pool, 4 - len(picks))]
    options = [(template.format(reason=_person(r.text, user=False)), kind) for r, kind in picks]
    question = _fill(rng.choice(REVISIT_QUESTIONS), item=item)
    return _Draft(item, question, options, [changes[-1].index], _person(latest.text, user=True))


def _generalize(state: _State, plan: _AspectPlan, rng: random.Random) -> _Draft | None:
    changes = [s for s in state.steps(plan) if s.reason is not None]
    if not changes:
        return None
    latest = changes[-1].reason
    assert latest is not None
    stated = {s.reason.motive for s in changes if s.reason is not None}
    others = rng.sample(sorted(m for m in MOTIVE_ADVICE if m not in stated), 3)
    options = [(rng.choice(MOTIVE_ADVICE[latest.motive]), "correct")]
    options += [(rng.choice(MOTIVE_ADVICE[m]), "other_motive") for m in others]
    question = plan.aspect.scenario + rng.choice(GENERALIZE_TAILS)
    return _Draft(plan.aspect.item, question, options, [changes[-1].index], _person(latest.text, user=True))


def _recommend(state: _State, plan: _AspectPlan, rng: random.Random) -> _Draft | None:
    steps = state.steps(plan)
    if not steps or steps[-1].stance != LIKE:
        return None
    stale: list[Aspect] = []
    disliked: list[Aspect] = []
    unmentioned: list[Aspect] = []
    for other in state.persona.aspects:
        seen = state.steps(other)
        if not seen:
            unmentioned.append(other.aspect)
        elif seen[-1].stance == LIKE:
            continue  # another current favourite is not a wrong answer
        elif any(s.stance == LIKE for s in seen):
            stale.append(other.aspect)
        else:
            disliked.append(other.aspect)
    known = {p.aspect.item for p in state.persona.aspects}
    unmentioned += [a for a in ASPECTS if a.item not in known]
    picks: list[tuple[Aspect, str]] = []
    for group, kind in ((stale, "stale"), (disliked, "disliked"), (unmentioned, "wrong_item")):
        take = min(len(group), 3 - len(picks))
        picks += [(a, kind) for a in rng.sample(group, take)]
    if len(picks) < 3:
        return None
    template = rng.choice(RECOMMEND_OPTIONS)
    options = [(template.format(rec=plan.aspect.recommendation), "correct")]
    options += [(template.format(rec=a.recommendation), kind) for a, kind in picks]
    return _Draft(plan.aspect.item, rng.choice(RECOMMEND_QUESTIONS), options, [steps[-1].index], plan.aspect.item)


def _suggest(state: _State, plan: _AspectPlan, rng: random.Random) -> _Draft | None:
    steps = state.steps(plan)
    done = state.ideas(plan)
    if not steps or steps[-1].stance != LIKE or len(done) < 3:
        return None
    item = plan.aspect.item
    tried = {idea for idea, _ in done}
    fresh = rng.choice([i for i in plan.aspect.ideas if i not in tried])
    template = rng.choice(SUGGEST_OPTIONS)
    picks = rng.sample(done, 3)
    options = [(template.format(idea=fresh), "correct")]
    options += [(template.format(idea=idea), "already_done") for idea, _ in picks]
    evidence = sorted({steps[-1].index, *(index for _, index in picks)})
    return _Draft(item, _fill(rng.choice(SUGGEST_QUESTIONS), item=item), options, evidence, item)


_ASPECT_BUILDERS: dict[str, Callable[[_State, _AspectPlan, random.Random], _Draft | None]] = {
    ACKNOWLEDGE_LATEST: _acknowledge,
    TRACK_EVOLUTION: _track,
    REVISIT_REASONS: _revisit,
    RECOMMEND: _recommend,
    SUGGEST_NEW: _suggest,
    GENERALIZE: _generalize,
}


def _question_points(history: History, rng: random.Random) -> list[int]:
    """Session boundaries (after the first session) plus one mid-session point per session."""
    total = len(history.messages)
    bounds = history.session_starts[1:] + [total]
    points = set(bounds)
    for number, start in enumerate(history.session_starts):
        stop = bounds[number]
        inside = [i for i in range(start + 3, stop - 1) if history.messages[i - 1].role == "assistant"]
        if inside:
            points.add(rng.choice(inside))
    return sorted(points)


def _draft(qtype: str, state: _State, subject: str, rng: random.Random) -> _Draft | None:
    if qtype == RECALL_FACTS:
        return _recall(state, subject, rng)
    plan = next(p for p in state.persona.aspects if p.aspect.item == subject)
    return _ASPECT_BUILDERS[qtype](state, plan, rng)


def _questions(persona: _Persona, history: History, count: int, seed: int, rng: random.Random) -> list[Question]:
    points = _question_points(history, rng)
    subjects = {t: (list(persona.facts) if t == RECALL_FACTS else [p.aspect.item for p in persona.aspects])
                for t in CANONICAL_TYPES}
    order = list(CANONICAL_TYPES)
    rng.shuffle(order)
    used: set[tuple[str, str, int]] = set()
    asked: dict[tuple[str, str], int] = {}
    questions: list[Question] = []
    turn = 0
    while len(questions) < count and order:
        qtype = order[turn % len(order)]
        # Least-asked subjects first, so one persona's questions spread over its facts and aspects.
        candidates = [(p, s) for p in points for s in subjects[qtype] if (qtype, s, p) not in used]
        rng.shuffle(candidates)
        candidates.sort(key=lambda c: asked.get((qtype, c[1]), 0))
        draft = None
        for point, subject in candidates:
            used.add((qtype, subject, point))  # feasibility depends on the state only: never retry
            draft = _draft(qtype, _State(persona, point), subject, rng)
            if draft is not None:
                break
        if draft is None:
            order.remove(qtype)  # no point in this history can ask this type any more
            continue
        turn += 1
        asked[(qtype, subject)] = asked.get((qtype, subject), 0) + 1
        questions.append(_finish(draft, qtype, point, history, persona, seed, len(questions), rng))
        follow = _follow_up(persona, points, subject, point) if qtype == ACKNOWLEDGE_LATEST else None
        # Only once every type has had its turn, so small question counts still cover all seven.
        if follow is not None and turn > len(CANONICAL_TYPES) and len(questions) < count and rng.random() < 0.6:
            # Ask again after the preference changed: the correct answer moves with it.
            used.add((qtype, subject, follow))
            again = _draft(qtype, _State(persona, follow), subject, rng)
            if again is not None:
                questions.append(_finish(again, qtype, follow, history, persona, seed, len(questions), rng))
    return questions


def _follow_up(persona: _Persona, points: list[int], subject: str, point: int) -> int | None:
    """The first question point after the next change of ``subject`` following ``point``."""
    plan = next((p for p in persona.aspects if p.aspect.item == subject), None)
    if plan is None:
        return None
    change = next((s.index for s in plan.steps if s.index >= point), None)
    if change is None:
        return None
    return next((p for p in points if p > change), None)


def _finish(draft: _Draft, qtype: str, end: int, history: History, persona: _Persona, seed: int,
            number: int, rng: random.Random) -> Question:
    order = list(range(len(draft.options)))
    rng.shuffle(order)
    options = [f"({OPTION_LETTERS[pos]}) {draft.options[i][0]}" for pos, i in enumerate(order)]
    first = min(draft.evidence)
    return Question(
        id=f"syn{seed}-p{persona.number}-q{number:03d}",
        type=qtype,
        topic=draft.subject,
        text=draft.text,
        options=options,
        answer=order.index(0),
        context_id=history.id,
        end_index=end,
        distance_blocks=history.session_number_of(end - 1) - history.session_number_of(first) + 1,
        distance_tokens=sum(count_tokens(m.content) for m in history.messages[first:end]),
        persona_id=str(persona.number),
        evidence=[f"m{i}" for i in draft.evidence],
        metadata={
            "raw_type": qtype,
            "subject": draft.subject,
            "key": draft.key,
            "option_kinds": [draft.options[i][1] for i in order],
            "evidence_messages": list(draft.evidence),
        },
    )


# --- entry point -----------------------------------------------------------------------------


def generate(personas: int = 2, seed: int = 0, sessions: int = 8, turns: int = 20, aspects: int = 6,
             questions: int = 24) -> Dataset:
    """A deterministic synthetic PersonaMem-format dataset.

    ``personas`` histories of ``sessions`` sessions, each about ``turns`` messages after its system
    message (more when a session has many events), with ``aspects`` changing preferences per persona
    and about ``questions`` questions per persona covering all seven types.
    """
    limits = {"personas": (personas, 1, len(FIRST_NAMES) * len(LAST_NAMES)), "sessions": (sessions, 3, 200),
              "turns": (turns, 4, 1000), "aspects": (aspects, 4, len(ASPECTS)), "questions": (questions, 1, 10_000)}
    for name, (value, low, high) in limits.items():
        if not low <= value <= high:
            raise ValueError(f"synthetic dataset: {name}={value} is out of range [{low}, {high}]")
    rng = random.Random(f"memlab-synthetic:{seed}")
    names = rng.sample([f"{f} {l}" for f in FIRST_NAMES for l in LAST_NAMES], personas)
    histories: dict[str, History] = {}
    all_questions: list[Question] = []
    for number in range(personas):
        prng = random.Random(f"memlab-synthetic:{seed}:{number}")
        fact_values = {kind: prng.choice(pool) for kind, pool in FACT_POOLS.items()}
        plans = [_plan_aspect(a, sessions, prng) for a in prng.sample(ASPECTS, aspects)]
        persona = _Persona(number, names[number], prng.randrange(22, 66), {}, plans)
        events = _events(fact_values, plans, persona.facts, sessions, prng)
        messages = _render(persona, events, sessions, turns, prng)
        context_id = f"synthetic-{seed}-p{number}"
        history = History(
            id=context_id,
            messages=messages,
            session_starts=split_at_system(messages),
            metadata={"persona": _describe(persona)},
            session_metadata=[{"session": n + 1} for n in range(sessions)],
        )
        histories[context_id] = history
        all_questions += _questions(persona, history, questions, seed, prng)
    spec = f"synthetic:personas={personas},seed={seed},sessions={sessions},turns={turns},aspects={aspects},questions={questions}"
    return Dataset(name=f"synthetic-{seed}", histories=histories, questions=all_questions, source=spec)


def _describe(persona: _Persona) -> dict[str, Any]:
    """The ground truth behind a history, for debugging and for tests."""
    return {
        "name": persona.name,
        "age": persona.age,
        "facts": {kind: {"value": v, "message": i} for kind, (v, i) in persona.facts.items()},
        "preferences": {
            p.aspect.item: [
                {"stance": s.stance, "message": s.index, "reason": _person(s.reason.text, user=True) if s.reason else None,
                 "motive": s.reason.motive if s.reason else None}
                for s in p.steps
            ]
            for p in persona.aspects
        },
    }
